#!/bin/bash
# Session 26's next call (bench/next_run_tm2q6.sh). From the repo root with .bin/memra (this tree, stripped) and
# .fix carried xz'd; parts in order of need, each skipped when BUDGET seconds would be passed (~6 min):
#   1. MEMRA_MMVQ_TM2_Q6=1 (k_mmvq_tm2 for 27b's tile-major Q6_K ffn_down): gate kernels 27b; logits of 66 tokens
#      (eval --all) cmp-equal to the default; decode@0 A/B, two rounds;
#   2. MEMRA_MMVQ_TL=1 (one tile a warp for the swiglu gate / up too: their 768-block grid on 9b is 1.45 waves at
#      TL = 2's 128 registers; TL = 1 was +1.4% on 9b and -2% on 27b on the H200 before tile-major), decode@0 A/B
#      on 9b and 35b-a3b q4_k_m (27b's is in part 1's rounds);
#   3. the tree's table: decode@0 and prefill 512 of 9b q4_k_m, 9b q8_0, 27b q4_k_m, 35b-a3b q4_k_m.
set -u
T0=$(date +%s); BUDGET=${BUDGET:-420}
left() { [ $(( $(date +%s) - T0 )) -lt $(( BUDGET - $1 )) ]; }
OUT=${OUT:-/tmp/next-run}; mkdir -p $OUT
bash bench/unpack.sh .bin .fix
B=.bin/memra
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
MEMRA_MMVQ_TM2_Q6=1 timeout 60 $B gate kernels --model 27b --seed 201 >>$OUT/gk.log 2>&1
echo "MMVQ_TM2_Q6=1 gate kernels 27b rc=$?"; grep -E "passed|FAIL" $OUT/gk.log | head
TOK=$(python3 -c "import random; random.seed(7); print(','.join(str(random.randrange(1000, 150000)) for _ in range(66)))")
mk() { $B mkmodel --preset $1 --type $2 --vocab tests/data/tiny-dense.bf16.gguf -o /tmp/ab-$1-$2.gguf >/dev/null 2>&1 ||
  echo "mkmodel $1 $2 failed"; }
f=/tmp/ab-27b-q4_k_m.gguf
mk 27b q4_k_m
for v in 0 1; do
  MEMRA_MMVQ_TM2_Q6=$v $B eval -m $f --backend cuda --ctx 256 --tokens $TOK --all -o /tmp/ev-$v.f32 2>>$OUT/ab.log
done
cmp /tmp/ev-0.f32 /tmp/ev-1.f32 && echo "27b eval 66 --all: MEMRA_MMVQ_TM2_Q6=1 logits cmp-equal to 0"
rm -f /tmp/ev-*.f32
BIN=$B MODELS=27b:q4_k_m ROUNDS=2 VARIANTS="- MEMRA_MMVQ_TM2_Q6=1 MEMRA_MMVQ_TL=1" OUT=$OUT bash bench/env_ab.sh 2>&1 |
  tee $OUT/ab.txt
echo "t=$(( $(date +%s) - T0 ))"
if left 120; then
  BIN=$B MODELS="9b:q4_k_m 35b-a3b:q4_k_m" ROUNDS=2 VARIANTS="- MEMRA_MMVQ_TL=1" OUT=$OUT bash bench/env_ab.sh 2>&1 |
    tee -a $OUT/ab.txt
fi
echo "t=$(( $(date +%s) - T0 ))"
for m in 9b:q4_k_m 9b:q8_0 27b:q4_k_m 35b-a3b:q4_k_m; do
  left 45 || break
  p=${m%%:*} t=${m##*:} f=/tmp/ab-$p-$t.gguf
  [ -f $f ] || mk $p $t
  echo "$m $($B bench -m $f --backend cuda --prefill 512 --depth 0 --decode-tokens 64 --reps 3 2>&1 |
    grep -E '^(copy|decode|prefill)' | tr -s ' ' | tr '\n' ';')"
  rm -f $f
done 2>&1 | tee $OUT/table.txt
echo "t=$(( $(date +%s) - T0 ))"
