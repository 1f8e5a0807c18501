#!/bin/bash
# Session 24 (NOT YET RUN): MEMRA_GDN_CLUSTER=1, k_gdn's decode launches as thread-block clusters of the blocks that
# share a key head (gdn.cu, CL): the head's o^2 parts meet in distributed shared memory instead of a fence, two
# atomics and the last block's L2 reads. Same arithmetic, so the logits must be cmp-equal. Clusters of 8 blocks on
# 9b and 35b-a3b, 4 on 0.8b, 12 on 27b (non-portable: taken only if the device fits one). One call from the repo
# root, .bin/memra and .fix carried xz'd (~4 min):
#   1. MEMRA_GDN_CLUSTER=1: gate kernels 9b (30 s first: a hang must not eat the call), 35b-a3b, 27b, 0.8b; gate
#      model;
#   2. 35b-a3b, 9b and 27b q4_k_m: logits cmp against the default, decode@0 A/B (bench/env_ab.sh), two rounds;
#   3. ncu durations of k_gdn in one 35b-a3b decode step, both ways.
set -u
T0=$(date +%s)
OUT=${OUT:-/tmp/next-gdncl}; mkdir -p $OUT
python3 -c "
import lzma,glob,os
for z in glob.glob('.fix/*.xz')+glob.glob('.bin/*.xz'):
    open(z[:-3],'wb').write(lzma.open(z).read()); os.remove(z)
"; chmod +x .bin/*
B=.bin/memra
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
for gm in 9b 35b-a3b 27b 0.8b; do
  MEMRA_GDN_CLUSTER=1 timeout 30 $B gate kernels --model $gm --seed 196 >>$OUT/gk.log 2>&1; rc=$?
  echo "GDN_CLUSTER=1 gate kernels $gm rc=$rc"; [ $rc = 124 ] && { echo "hang: stop"; exit 1; }
done
grep -E "passed|FAIL" $OUT/gk.log | head -20
MEMRA_GDN_CLUSTER=1 timeout 60 $B gate model --backend cuda --fixtures tests/data --fixtures .fix >$OUT/gm.log 2>&1
echo "GDN_CLUSTER=1 gate model rc=$?"; grep -E "FAIL|checks" $OUT/gm.log | head
TOK=$(python3 -c "import random; random.seed(7); print(','.join(str(random.randrange(1000, 150000)) for _ in range(66)))")
for m in 35b-a3b:q4_k_m 9b:q4_k_m 27b:q4_k_m; do
  p=${m%%:*} t=${m##*:} f=/tmp/ab-$p-$t.gguf
  $B mkmodel --preset $p --type $t --vocab tests/data/tiny-dense.bf16.gguf -o $f >/dev/null 2>&1 || echo mkmodel failed
  for v in 0 1; do
    MEMRA_GDN_CLUSTER=$v $B eval -m $f --backend cuda --ctx 256 --tokens $TOK --all -o /tmp/ev-$v.f32 2>>$OUT/ab.log
  done
  cmp /tmp/ev-0.f32 /tmp/ev-1.f32 && echo "$m eval 66 --all: GDN_CLUSTER=1 logits cmp-equal to 0"
  rm -f /tmp/ev-*.f32
  if [ $p = 35b-a3b ]; then
    for v in 0 1; do
      MEMRA_GDN_CLUSTER=$v timeout 90 ncu --clock-control none --csv -k regex:k_gdn --metrics gpu__time_duration.sum \
        $B bench -m $f --backend cuda --prefill 16 --depth 0 --decode-tokens 2 --reps 1 >$OUT/ncu-gdn-$v.csv 2>/dev/null
      python3 bench/ncu_kernels.py $OUT/ncu-gdn-$v.csv --top 6 | sed "s/^/GDN_CLUSTER=$v: /"
    done
  fi
  BIN=$B MODELS=$m ROUNDS=2 VARIANTS="- MEMRA_GDN_CLUSTER=1" OUT=$OUT bash bench/env_ab.sh # removes the model
  echo "t=$(( $(date +%s) - T0 ))"
done 2>&1 | tee $OUT/ab.txt
