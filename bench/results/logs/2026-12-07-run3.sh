#!/bin/bash
# NOTE (after the run): f35 is set inside the { } | tee pipeline (a subshell), so the table and ncu parts
# stopped at "f35: unbound variable" after the 9b q4_k_m row; run 4 ran the rest on the same warm machine.
# The pending device call of session 29. From the repo root with .bin/memra (this tree, stripped) and .fix
# carried xz'd; parts in order of need, each skipped when BUDGET seconds would be passed:
#   1. gate kernels 35b-a3b (k_moe_tc_gu2 now the default), and under MEMRA_MOE_DN_CP=1 (k_moe_tc_down's Q6_K
#      rows by cp.async); gate kernels 9b under MEMRA_MMVQ_WIDE2=1 (grids of up to 2 x the SMs widened); gate model;
#   2. 35b-a3b q4_k_m: logits of 66 tokens (eval --all) under MEMRA_MOE_DN_CP=1 cmp-equal to the default (same
#      bits by design); decode@0 [-, DN_CP, WIDE2], two rounds;
#   3. decode@0, two rounds: 9b [-, WIDE2, TIGHT=5, TIGHT=8], 27b [-, TIGHT=1, TIGHT=5, TIGHT=6]
#      (MEMRA_MMVQ_TIGHT=N: tight launches for ks >= N only);
#   4. the table: decode@0 and prefill 512 of 9b q4_k_m, 9b q8_0, 27b q4_k_m, 35b-a3b q4_k_m, default switches;
#   5. ncu of 4 k_moe_tc_down launches (35b-a3b) under - and DN_CP.
# Output under $OUT: run.txt (everything above), table.txt, logs.tar.gz (gate and bench logs, ncu pages).
set -u
T0=$(date +%s); BUDGET=${BUDGET:-450}
left() { [ $(( $(date +%s) - T0 )) -lt $(( BUDGET - $1 )) ]; }
OUT=${OUT:-/tmp/next-run}; mkdir -p $OUT
bash bench/unpack.sh .bin .fix
B=.bin/memra
L=$OUT/logs; mkdir -p $L
{
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
timeout 60 $B gate kernels --model 35b-a3b --seed 207 >>$L/gk.log 2>&1; echo "gate kernels 35b-a3b rc=$?"
MEMRA_MOE_DN_CP=1 timeout 60 $B gate kernels --model 35b-a3b --seed 208 >>$L/gk.log 2>&1
echo "MEMRA_MOE_DN_CP=1 gate kernels 35b-a3b rc=$?"
MEMRA_MMVQ_WIDE2=1 timeout 60 $B gate kernels --model 9b --seed 209 >>$L/gk.log 2>&1
echo "MEMRA_MMVQ_WIDE2=1 gate kernels 9b rc=$?"
timeout 60 $B gate model --backend cuda --fixtures tests/data --fixtures .fix >$L/gm.log 2>&1
echo "gate model rc=$?"
grep -hE "passed|FAIL" $L/gk.log $L/gm.log | head -20
echo "t=$(( $(date +%s) - T0 ))"
ab() { # ab FILE TAG VARIANT...: decode@0 tok/s of each variant (comma-separated env), two interleaved rounds
  local f=$1 tag=$2; shift 2
  for r in 1 2; do
    for v in "$@"; do
      e=; [ $v != - ] && e=${v//,/ }
      d=$(env $e $B bench -m $f --backend cuda --prefill 16 --depth 0 --decode-tokens 64 --reps 3 2>&1 |
        tee -a $L/ab.log | grep '^decode' | tr -s ' ')
      echo "$tag r$r [$v] $d"
    done
  done
}
mk() { $B mkmodel --preset $1 --type $2 --vocab tests/data/tiny-dense.bf16.gguf -o $3 >/dev/null 2>&1 ||
  echo "mkmodel $1 $2 failed"; }
TOK=$(python3 -c "import random; random.seed(7)
print(','.join(str(random.randrange(1000, 150000)) for _ in range(66)))")
f=/tmp/m.gguf f35=/tmp/ab-35b-a3b-q4_k_m.gguf
if left 120; then
  f=$f35
  mk 35b-a3b q4_k_m $f
  $B eval -m $f --backend cuda --ctx 256 --tokens $TOK --all -o /tmp/ev-0.f32 2>>$L/ab.log
  MEMRA_MOE_DN_CP=1 $B eval -m $f --backend cuda --ctx 256 --tokens $TOK --all -o /tmp/ev-1.f32 2>>$L/ab.log
  cmp /tmp/ev-0.f32 /tmp/ev-1.f32 && echo "35b-a3b eval 66 --all: MEMRA_MOE_DN_CP=1 logits cmp-equal to the default"
  rm -f /tmp/ev-*.f32
  ab $f "35b-a3b q4_k_m" - MEMRA_MOE_DN_CP=1 MEMRA_MMVQ_WIDE2=1
  f=/tmp/m.gguf
  echo "t=$(( $(date +%s) - T0 ))"
fi
if left 120; then
  mk 9b q4_k_m $f
  ab $f "9b q4_k_m" - MEMRA_MMVQ_WIDE2=1 MEMRA_MMVQ_TIGHT=5 MEMRA_MMVQ_TIGHT=8
  rm -f $f
  echo "t=$(( $(date +%s) - T0 ))"
fi
if left 150; then
  mk 27b q4_k_m $f
  ab $f "27b q4_k_m" - MEMRA_MMVQ_TIGHT=1 MEMRA_MMVQ_TIGHT=5 MEMRA_MMVQ_TIGHT=6
  rm -f $f
  echo "t=$(( $(date +%s) - T0 ))"
fi
} 2>&1 | tee $OUT/run.txt
for m in 9b:q4_k_m 9b:q8_0 27b:q4_k_m 35b-a3b:q4_k_m; do
  left 45 || break
  p=${m%%:*} t=${m##*:} f=/tmp/ab-$p-$t.gguf
  [ -f $f ] || $B mkmodel --preset $p --type $t --vocab tests/data/tiny-dense.bf16.gguf -o $f >/dev/null 2>&1 ||
    echo "mkmodel $m failed"
  echo "$m $($B bench -m $f --backend cuda --prefill 512 --depth 0 --decode-tokens 64 --reps 3 2>&1 |
    grep -E '^(copy|decode|prefill)' | tr -s ' ' | tr '\n' ';')"
  [ $f = $f35 ] || rm -f $f
done 2>&1 | tee $OUT/table.txt
# last, where time is left: ncu of 4 k_moe_tc_down launches (35b-a3b), the default and MEMRA_MOE_DN_CP=1
for v in - MEMRA_MOE_DN_CP=1; do
  [ -f $f35 ] && left 60 || break
  e=; [ $v != - ] && e=$v
  env $e timeout 50 ncu -k regex:k_moe_tc_down -c 4 --section SpeedOfLight --section Occupancy \
    --section SchedulerStats --section WarpStateStats $B bench -m $f35 --backend cuda --prefill 16 --depth 0 \
    --decode-tokens 2 --reps 1 >$L/ncu-down-${v//=/}.txt 2>&1
  echo "ncu down [$v] rc=$? $(grep -E '^ +Duration' $L/ncu-down-${v//=/}.txt | tr -s ' ' | tr '\n' ';')"
done 2>&1 | tee -a $OUT/run.txt
echo "t=$(( $(date +%s) - T0 ))"
cd $OUT && tar czf logs.tar.gz logs && rm -rf logs
