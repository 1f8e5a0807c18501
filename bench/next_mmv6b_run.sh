#!/bin/bash
# Session 24, run 2: MEMRA_MMV6B=2, k_mmv6b (the Q6_K head's bulk-copy kernel, mmv6.cuh) for every Q6_K decode
# matvec whose tiles fit (rows of at most 8192: ssm_in qkv, attn_qkv), in place of k_mmv6 (32-39% of DRAM peak on
# those shapes, bench/results/2026-12-06c-h100.md). Per tile the arithmetic is k_mmv6's, so the logits must be
# cmp-equal. One call from the repo root, .bin/memra and .fix carried xz'd (~4 min):
#   1. MEMRA_MMV6B=2: gate kernels 27b, 9b, 35b-a3b, 0.8b; gate model;
#   2. 27b, 9b and 35b-a3b q4_k_m: logits cmp MMV6B 1 vs 2, decode@0 A/B, two rounds;
#   3. ncu durations and DRAM bytes of one 27b decode step with MMV6B=2.
set -u
T0=$(date +%s)
OUT=${OUT:-/tmp/next-mmv6b}; mkdir -p $OUT
python3 -c "
import lzma,glob,os
for z in glob.glob('.fix/*.xz')+glob.glob('.bin/*.xz'):
    open(z[:-3],'wb').write(lzma.open(z).read()); os.remove(z)
"; chmod +x .bin/*
B=.bin/memra
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
for gm in 27b 9b 35b-a3b 0.8b; do
  MEMRA_MMV6B=2 timeout 60 $B gate kernels --model $gm --seed 193 >>$OUT/gk.log 2>&1
  echo "MMV6B=2 gate kernels $gm rc=$?"
done
grep -E "passed|FAIL" $OUT/gk.log | head -20
MEMRA_MMV6B=2 timeout 60 $B gate model --backend cuda --fixtures tests/data --fixtures .fix >$OUT/gm.log 2>&1
echo "MMV6B=2 gate model rc=$?"; grep -E "FAIL|checks" $OUT/gm.log | head
TOK=$(python3 -c "import random; random.seed(7); print(','.join(str(random.randrange(1000, 150000)) for _ in range(66)))")
for m in 27b:q4_k_m 9b:q4_k_m 35b-a3b:q4_k_m; do
  p=${m%%:*} t=${m##*:} f=/tmp/ab-$p-$t.gguf
  $B mkmodel --preset $p --type $t --vocab tests/data/tiny-dense.bf16.gguf -o $f >/dev/null 2>&1 || echo mkmodel failed
  for v in 1 2; do
    MEMRA_MMV6B=$v $B eval -m $f --backend cuda --ctx 256 --tokens $TOK --all -o /tmp/ev-$v.f32 2>>$OUT/ab.log
  done
  cmp /tmp/ev-1.f32 /tmp/ev-2.f32 && echo "$m eval 66 --all: MMV6B=2 logits cmp-equal to MMV6B=1"
  for r in 1 2; do for v in 1 2; do
    line=$(MEMRA_MMV6B=$v $B bench -m $f --backend cuda --prefill 16 --depth 0 --decode-tokens 64 --reps 3 2>&1 |
      tee -a $OUT/ab.log | grep '^decode' | tr -s ' ')
    echo "$m r$r MMV6B=$v: $line"; done; done
  if [ $p = 27b ]; then
    MEMRA_MMV6B=2 timeout 150 ncu --clock-control none --csv \
      --metrics gpu__time_duration.sum,dram__bytes_read.sum $B bench -m $f --backend cuda --prefill 16 --depth 0 \
      --decode-tokens 2 --reps 1 >$OUT/ncu-dec-27b.csv 2>/dev/null
    echo "ncu 27b rc=$?"
    python3 bench/ncu_kernels.py $OUT/ncu-dec-27b.csv --after-argmax 0 --top 30 > $OUT/ncu-dec-27b.txt
    gzip -f $OUT/ncu-dec-27b.csv
  fi
  rm -f $f /tmp/ev-*.f32
  echo "t=$(( $(date +%s) - T0 ))"
done 2>&1 | tee $OUT/ab.txt
cat $OUT/ncu-dec-27b.txt
