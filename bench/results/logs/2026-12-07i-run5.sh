#!/bin/bash
# Session 37, run 5 (~3 min on an H100): MEMRA_MMVQ_REP=R, R copies of the prep's planes so that a matvec's
# blocks do not all read the same L2 lines right after their PDL wait (mmvq.cuh, mmvq_rep). Same bits by
# construction. Gate kernels 9b under R = 8; logits of 66 tokens cmp-equal across R; decode@0 A/B.
#   Device:      BUDGET=300 OUT=$OUT bash bench/next_run_rep.sh   (carry .bin)
set -u
T0=$(date +%s); BUDGET=${BUDGET:-300}
left() { [ $(( $(date +%s) - T0 )) -lt $(( BUDGET - $1 )) ]; }
bash bench/unpack.sh .bin
B=.bin/memra
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
MEMRA_MMVQ_REP=8 timeout 120 $B gate kernels --model 9b --seed 372 >$OUT/gk.log 2>&1
echo "gate kernels 9b REP=8 rc=$? $(grep -h 'passed' $OUT/gk.log | tail -1)"; grep -h FAIL $OUT/gk.log | head -5
gzip -f $OUT/gk.log
f=/tmp/m.gguf
dec() { env "$@" $B bench -m $f --backend cuda --prefill 16 --depth 0 --decode-tokens 64 --reps 3 2>&1 |
  grep '^decode' | tr -s ' '; }
TOK=$(python3 -c "import random; random.seed(7)
print(','.join(str(random.randrange(1000, 150000)) for _ in range(66)))")
for m in 9b 35b-a3b; do
  left 90 || break
  $B mkmodel --preset $m --type q4_k_m --vocab tests/data/tiny-dense.bf16.gguf -o $f >/dev/null 2>&1 ||
    echo mkmodel failed
  for r in 1 8 32; do
    MEMRA_MMVQ_REP=$r $B eval -m $f --backend cuda --ctx 256 --tokens $TOK --all -o /tmp/ev-$r.f32 2>/dev/null
  done
  cmp /tmp/ev-1.f32 /tmp/ev-8.f32 && cmp /tmp/ev-1.f32 /tmp/ev-32.f32 && echo "$m eval 66 --all: REP 8, 32 cmp-equal to 1"
  for rd in 1 2; do
    left 40 || break
    for r in 1 4 16 64; do echo "$m d0 r$rd [REP=$r] $(dec MEMRA_MMVQ_REP=$r)"; done
  done
  rm -f $f /tmp/ev-*.f32
done
echo "t=$(( $(date +%s) - T0 ))"
