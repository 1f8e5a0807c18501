#!/bin/bash
# next_run_q8.sh cut to what fits a call of ~60 s: MEMRA_MOE_Q8=1 gate kernels 35b-a3b, then, while time is
# left, one decode timing each of the default and MEMRA_MOE_Q8=1 on 35b-a3b q4_k_m.
#   OUT=$OUT bash bench/next_run_q8_min.sh   (carry .bin .fix)
set -u
T0=$(date +%s)
bash bench/unpack.sh .bin .fix
B=.bin/memra
nvidia-smi --query-gpu=name --format=csv,noheader
MEMRA_MOE_Q8=1 timeout 40 $B gate kernels --model 35b-a3b --seed 301 >$OUT/gk.log 2>&1
echo "MEMRA_MOE_Q8=1 gate kernels 35b-a3b rc=$? t=$(( $(date +%s) - T0 ))"
grep -hE "passed|FAIL" $OUT/gk.log | head -20
grep -hE "moe_block" $OUT/gk.log | head -24
f=/tmp/m.gguf
$B mkmodel --preset 35b-a3b --type q4_k_m --vocab tests/data/tiny-dense.bf16.gguf -o $f >/dev/null 2>&1
echo "mkmodel t=$(( $(date +%s) - T0 ))"
for v in - MEMRA_MOE_Q8=1 - MEMRA_MOE_Q8=1; do
  e=; [ $v != - ] && e=$v
  echo "35b-a3b q4_k_m [$v] $(env $e $B bench -m $f --backend cuda --prefill 16 --depth 0 --decode-tokens 64 \
    --reps 3 2>&1 | grep '^decode' | tr -s ' ') t=$(( $(date +%s) - T0 ))"
done
