#!/bin/bash
# The pending device call of session 29 (its device time ran out): MEMRA_MMVQ_TIGHT_Q6K8=1, the tight k_mmvq_tm
# for Q6_K launches at ks 8 too (27b's Q6_K ffn_down: ~+1.5% by the differences of 2026-12-07's runs 3 and 5;
# 9b's Q6_K ffn_down untimed, and ks 8 tight for both types cost 9b 5.5%): gate kernels 9b and 27b under it
# (the same kernels MEMRA_MMVQ_TIGHT=1 passed), logits cmp, decode@0 9b and 27b q4_k_m [-, Q6K8], two rounds.
# Keep it as the default only if 9b does not lose. Also the first gate run of 122b-a10b's shapes. Then, where
# BUDGET seconds allow, a fresh per-kernel table of one decode step of 35b-a3b and 9b q4_k_m under the defaults
# (ncu durations and DRAM bytes, every kernel alone; python3 bench/ncu_kernels.py ncu-M.csv.gz --after-argmax 0
# sums it). ~4 min, ~7 with the tables.
#   BUDGET=400 OUT=$OUT bash bench/next_run_q6k8.sh   (carry .bin .fix; .bin/memra this tree, stripped, xz'd)
set -u
T0=$(date +%s); BUDGET=${BUDGET:-400}
left() { [ $(( $(date +%s) - T0 )) -lt $(( BUDGET - $1 )) ]; }
bash bench/unpack.sh .bin .fix
B=.bin/memra
nvidia-smi --query-gpu=name --format=csv,noheader
for m in 9b 27b; do
  MEMRA_MMVQ_TIGHT_Q6K8=1 timeout 60 $B gate kernels --model $m --seed 211 >>$OUT/gk.log 2>&1
  echo "MEMRA_MMVQ_TIGHT_Q6K8=1 gate kernels $m rc=$?"
done
timeout 120 $B gate kernels --model 122b-a10b --seed 212 >>$OUT/gk.log 2>&1
echo "gate kernels 122b-a10b rc=$? (its first run: the shapes added in session 29)"
grep -hE "passed|FAIL" $OUT/gk.log | head -30
TOK=$(python3 -c "import random; random.seed(7)
print(','.join(str(random.randrange(1000, 150000)) for _ in range(66)))")
f=/tmp/m.gguf
for m in 9b 27b; do
  $B mkmodel --preset $m --type q4_k_m --vocab tests/data/tiny-dense.bf16.gguf -o $f >/dev/null 2>&1 ||
    echo mkmodel failed
  $B eval -m $f --backend cuda --ctx 256 --tokens $TOK --all -o /tmp/ev-0.f32 2>/dev/null
  MEMRA_MMVQ_TIGHT_Q6K8=1 $B eval -m $f --backend cuda --ctx 256 --tokens $TOK --all -o /tmp/ev-1.f32 2>/dev/null
  cmp /tmp/ev-0.f32 /tmp/ev-1.f32 && echo "$m eval 66 --all: MEMRA_MMVQ_TIGHT_Q6K8=1 logits cmp-equal to the default"
  for r in 1 2; do
    for v in - MEMRA_MMVQ_TIGHT_Q6K8=1; do
      e=; [ $v != - ] && e=$v
      echo "$m q4_k_m r$r [$v] $(env $e $B bench -m $f --backend cuda --prefill 16 --depth 0 --decode-tokens 64 \
        --reps 3 2>&1 | grep '^decode' | tr -s ' ')"
    done
  done
  rm -f $f /tmp/ev-*.f32
done
for m in 35b-a3b 9b; do
  left 180 || break
  $B mkmodel --preset $m --type q4_k_m --vocab tests/data/tiny-dense.bf16.gguf -o $f >/dev/null 2>&1 ||
    echo mkmodel failed
  mx=gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum
  timeout 150 ncu --clock-control none --csv --metrics $mx $B bench -m $f --backend cuda --prefill 16 --depth 0 \
    --decode-tokens 2 --reps 1 >$OUT/ncu-$m.csv 2>/dev/null
  echo "ncu $m rc=$?"
  python3 bench/ncu_kernels.py $OUT/ncu-$m.csv --after-argmax 0 --top 30 | tee $OUT/ncu-$m-step.txt
  gzip -f $OUT/ncu-$m.csv
  rm -f $f
done
echo "t=$(( $(date +%s) - T0 ))"
