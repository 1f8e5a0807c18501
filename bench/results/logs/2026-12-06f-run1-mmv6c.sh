#!/bin/bash
# Session 24: the Q6_K decode matvecs by bulk copies. Two switches, both off by default until this runs:
#   MEMRA_MMV6B=2: k_mmv6b (the head's whole-tile kernel) for every Q6_K T <= 4 launch whose rows fit (<= 8192:
#     ssm_in qkv, attn_qkv);
#   MEMRA_MMV6C=1: k_mmv6c (new, mmv6.cuh) for longer rows (ffn_down {12288, 4096}, {17408, 5120}); =2: for every
#     T <= 4 Q6_K launch k_mmv6b does not take. MEMRA_MMV6C_D=3 / MEMRA_MMV6C_C=4: its other instantiations.
# All of them are k_mmv6's arithmetic, so the logits must be cmp-equal to the default's. One call from the repo root,
# .bin/memra, .bin/mmv6_lab (bench/kernels/lab.sh mmv6_lab, stripped) and .fix carried xz'd (~6 min; BUDGET=s drops
# the models that would not fit):
#   0. mmv6_lab on the 9b / 27b / 35b-a3b Q6_K decode shapes under each switch: CPU check, T = 4, 8, 15 rows
#      memcmp-equal to T = 1 (k_mmv6c / k_mmv6b against k_mmv6), microseconds a launch;
#   1. gate kernels 9b under MMV6C=2 (k_mmv6c on every T <= 4 shape; 30 s: a hang must not eat the call), then
#      27b, 9b, 35b-a3b, 0.8b under MMV6B=2 MMV6C=1; gate model;
#   2. 27b, 9b and 35b-a3b q4_k_m: logits cmp of each configuration against the default; decode@0 A/B, two rounds;
#   3. ncu durations of one 27b decode step under MMV6B=2 MMV6C=1 (before its A/B, when time allows).
set -u
T0=$(date +%s)
OUT=${OUT:-/tmp/next-mmv6c}; mkdir -p $OUT
python3 -c "
import lzma,glob,os
for z in glob.glob('.fix/*.xz')+glob.glob('.bin/*.xz'):
    open(z[:-3],'wb').write(lzma.open(z).read()); os.remove(z)
"; chmod +x .bin/*
B=.bin/memra
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
for s in "17408 5120" "12288 4096" "5120 10240" "4096 8192" "2048 8192"; do
  for cfg in "MEMRA_MMV6C=0" "MEMRA_MMV6B=2" "MEMRA_MMV6C=2"; do
    echo "== $cfg $s" >> $OUT/lab.txt
    env $cfg timeout 30 .bin/mmv6_lab $s >> $OUT/lab.txt 2>&1; echo "rc=$?" >> $OUT/lab.txt
  done
done
grep -E "^==|err|T=1 |rc=[1-9]|FAIL" $OUT/lab.txt
# a hang in the new kernel (an mbarrier never completing) must not eat the call: a short first try
MEMRA_MMV6C=2 timeout 30 $B gate kernels --model 9b --seed 194 >$OUT/smoke.log 2>&1; rc=$?
echo "smoke MMV6C=2 gate kernels 9b rc=$rc"; tail -3 $OUT/smoke.log
C_OK=1; [ $rc = 124 ] && C_OK=0
GCFGS=("MEMRA_MMV6B=2 MEMRA_MMV6C=1"); [ $C_OK = 0 ] && GCFGS=("MEMRA_MMV6B=2")
for cfg in "${GCFGS[@]}"; do
  for gm in 27b 9b 35b-a3b 0.8b; do
    env $cfg timeout 60 $B gate kernels --model $gm --seed 194 >>$OUT/gk.log 2>&1
    echo "$cfg gate kernels $gm rc=$?"
  done
  env $cfg timeout 60 $B gate model --backend cuda --fixtures tests/data --fixtures .fix >>$OUT/gm.log 2>&1
  echo "$cfg gate model rc=$?"
done
grep -E "passed|FAIL" $OUT/gk.log $OUT/gm.log | head -30
echo "t=$(( $(date +%s) - T0 ))"
TOK=$(python3 -c "import random; random.seed(7); print(','.join(str(random.randrange(1000, 150000)) for _ in range(66)))")
# configurations as bench/env_ab.sh's VARIANTS take them: "-" the default, commas between assignments
V_B=MEMRA_MMV6B=2 V_C=MEMRA_MMV6C=1 V_BC=MEMRA_MMV6B=2,MEMRA_MMV6C=1; [ $C_OK = 0 ] && V_BC=$V_B
for m in 27b:q4_k_m 9b:q4_k_m 35b-a3b:q4_k_m; do
  p=${m%%:*} t=${m##*:} f=/tmp/ab-$p-$t.gguf
  [ $(( $(date +%s) - T0 )) -gt $(( ${BUDGET:-480} - 100 )) ] && { echo "$m: skipped (time)"; continue; }
  $B mkmodel --preset $p --type $t --vocab tests/data/tiny-dense.bf16.gguf -o $f >/dev/null 2>&1 || echo mkmodel failed
  $B eval -m $f --backend cuda --ctx 256 --tokens $TOK --all -o /tmp/ev-base.f32 2>>$OUT/ab.log
  for v in $(printf '%s\n' $V_B $V_BC | sort -u); do
    env ${v//,/ } $B eval -m $f --backend cuda --ctx 256 --tokens $TOK --all -o /tmp/ev-c.f32 2>>$OUT/ab.log
    cmp /tmp/ev-base.f32 /tmp/ev-c.f32 >/dev/null && echo "$m $v: logits cmp-equal" || echo "$m $v: LOGITS DIFFER"
  done
  rm -f /tmp/ev-*.f32
  if [ $p = 27b ] && [ $(( $(date +%s) - T0 )) -lt 170 ]; then
    env ${V_BC//,/ } timeout 150 ncu --clock-control none --csv \
      --metrics gpu__time_duration.sum,dram__bytes_read.sum $B bench -m $f --backend cuda --prefill 16 --depth 0 \
      --decode-tokens 2 --reps 1 >$OUT/ncu-dec-27b.csv 2>/dev/null
    echo "ncu 27b rc=$?"
    python3 bench/ncu_kernels.py $OUT/ncu-dec-27b.csv --after-argmax 0 --top 30 > $OUT/ncu-dec-27b.txt
    gzip -f $OUT/ncu-dec-27b.csv
  fi
  VS="- $V_B $V_C $V_BC $V_BC,MEMRA_MMV6C_D=3 $V_BC,MEMRA_MMV6C_C=4"
  [ $p != 27b ] && VS="- $V_B $V_BC"; [ $C_OK = 0 ] && VS="- $V_B"
  BIN=$B MODELS=$m ROUNDS=2 VARIANTS="$VS" OUT=$OUT bash bench/env_ab.sh # decode@0 A/B; removes the model
  echo "t=$(( $(date +%s) - T0 ))"
done 2>&1 | tee $OUT/ab.txt
[ -f $OUT/ncu-dec-27b.txt ] && cat $OUT/ncu-dec-27b.txt
