#!/bin/bash
# Session 27's device call (bench/next_run_ash.sh). From the repo root with .bin/memra (this tree, stripped) and .fix
# carried xz'd; parts in order of need, each skipped when BUDGET seconds would be passed (~6 min):
#   1. gate kernels 9b, 27b and gate model under MEMRA_MMVQ_ASH=1 (k_mmvq_tm's activations through its ring) and
#      MEMRA_MMVQ_TM2_Q6=1 (k_mmvq_tm2 for 27b's tile-major Q6_K ffn_down), both written without a GPU;
#   2. per model (27b, 9b, 35b-a3b q4_k_m): logits of 66 tokens (eval --all: a chunk of 64, then T = 2) under both
#      switches cmp-equal to the default (each moves no bit by design); decode@0 A/B, two interleaved rounds:
#      27b [-, ASH, TM2_Q6, both], 9b [-, ASH, MEMRA_MMVQ_TL=1, ASH + TL=1, MEMRA_DIAG_NOPREP=1 (no preps: wrong
#      results, bounds what they cost)], 35b-a3b [-, ASH];
#   3. the table: decode@0 and prefill 512 of 9b q4_k_m, 9b q8_0, 27b q4_k_m, 35b-a3b q4_k_m, default switches.
set -u
T0=$(date +%s); BUDGET=${BUDGET:-420}
left() { [ $(( $(date +%s) - T0 )) -lt $(( BUDGET - $1 )) ]; }
OUT=${OUT:-/tmp/next-run}; mkdir -p $OUT
bash bench/unpack.sh .bin .fix
B=.bin/memra
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
NEW="MEMRA_MMVQ_ASH=1 MEMRA_MMVQ_TM2_Q6=1"
for gm in 27b 9b; do
  timeout 60 env $NEW $B gate kernels --model $gm --seed 202 >>$OUT/gk.log 2>&1; echo "gate kernels $gm rc=$?"
done
timeout 60 env $NEW $B gate model --backend cuda --fixtures tests/data --fixtures .fix >$OUT/gm.log 2>&1
echo "gate model rc=$?"
grep -E "passed|FAIL" $OUT/gk.log $OUT/gm.log | head -20
echo "t=$(( $(date +%s) - T0 ))"
TOK=$(python3 -c "import random; random.seed(7)
print(','.join(str(random.randrange(1000, 150000)) for _ in range(66)))")
V27="- MEMRA_MMVQ_ASH=1 MEMRA_MMVQ_TM2_Q6=1 MEMRA_MMVQ_ASH=1,MEMRA_MMVQ_TM2_Q6=1"
V9="- MEMRA_MMVQ_ASH=1 MEMRA_MMVQ_TL=1 MEMRA_MMVQ_ASH=1,MEMRA_MMVQ_TL=1 MEMRA_DIAG_NOPREP=1"
for mv in "27b|$V27" "9b|$V9" "35b-a3b|- MEMRA_MMVQ_ASH=1"; do
  m=${mv%%|*} vs=${mv#*|}
  left 100 || break
  f=/tmp/ab-$m.gguf
  $B mkmodel --preset $m --type q4_k_m --vocab tests/data/tiny-dense.bf16.gguf -o $f >/dev/null 2>&1 ||
    echo mkmodel failed
  $B eval -m $f --backend cuda --ctx 256 --tokens $TOK --all -o /tmp/ev-0.f32 2>>$OUT/ab.log
  env $NEW $B eval -m $f --backend cuda --ctx 256 --tokens $TOK --all -o /tmp/ev-1.f32 2>>$OUT/ab.log
  cmp /tmp/ev-0.f32 /tmp/ev-1.f32 && echo "$m eval 66 --all: $NEW logits cmp-equal to the default"
  rm -f /tmp/ev-*.f32
  for r in 1 2; do
    for v in $vs; do
      e=; [ $v != - ] && e=${v//,/ }
      d=$(env $e $B bench -m $f --backend cuda --prefill 16 --depth 0 --decode-tokens 64 --reps 3 2>&1 |
        tee -a $OUT/ab.log | grep '^decode' | tr -s ' ')
      echo "$m q4_k_m r$r [$v] $d"
    done
  done
  rm -f $f
  echo "t=$(( $(date +%s) - T0 ))"
done 2>&1 | tee $OUT/ab.txt
for m in 9b:q4_k_m 9b:q8_0 27b:q4_k_m 35b-a3b:q4_k_m; do
  left 45 || break
  p=${m%%:*} t=${m##*:} f=/tmp/ab-$p-$t.gguf
  $B mkmodel --preset $p --type $t --vocab tests/data/tiny-dense.bf16.gguf -o $f >/dev/null 2>&1 ||
    echo "mkmodel $m failed"
  echo "$m $($B bench -m $f --backend cuda --prefill 512 --depth 0 --decode-tokens 64 --reps 3 2>&1 |
    grep -E '^(copy|decode|prefill)' | tr -s ' ' | tr '\n' ';')"
  rm -f $f
done 2>&1 | tee $OUT/table.txt
echo "t=$(( $(date +%s) - T0 ))"
