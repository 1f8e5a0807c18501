#!/bin/bash
# MEMRA_MMVQ_PS=1 (mmvq.cuh, k_mmvq_tm's staged form; opt-in, the same bits by construction): T = 1 decode
# matvecs at ring depth 2 stage all of a warp's activation planes into shared memory right after the wait (one
# L2 round trip instead of one a super-block in series) and read the residual row then. Gates under the switch
# (gate kernels: every T = 1 matmul against the CPU and memcmp against the same row in T = 6 / 20 batches, which
# take the plain path; gate model), eval logits cmp against the default (65 tokens --all: a chunk of 64, then a
# T = 1 step), then decode@0 A/B in interleaved rounds.
#   BUDGET=420 OUT=$OUT bash bench/next_run_ps.sh   (carry .bin .fix; .bin/memra this tree, stripped, xz'd)
set -u
T0=$(date +%s); BUDGET=${BUDGET:-420}
left() { [ $(( $(date +%s) - T0 )) -lt $(( BUDGET - $1 )) ]; }
bash bench/unpack.sh .bin .fix
B=.bin/memra
nvidia-smi --query-gpu=name --format=csv,noheader
f=/tmp/m.gguf
dec() { local d=$1; shift; env "$@" $B bench -m $f --backend cuda --prefill 16 --depth $d --decode-tokens 64 --reps 3 2>&1 |
  grep '^decode' | tr -s ' '; }
TOK=$(python3 -c "import random; random.seed(7)
print(','.join(str(random.randrange(1000, 150000)) for _ in range(65)))")
MEMRA_MMVQ_PS=1 timeout 60 $B gate model --backend cuda --fixtures tests/data --fixtures .fix >$OUT/gm.log 2>&1
echo "PS=1 gate model rc=$? $(tail -1 $OUT/gm.log)"
for m in 9b 27b 35b-a3b 0.8b; do
  MEMRA_MMVQ_PS=1 timeout 90 $B gate kernels --model $m --seed 363 >$OUT/gk-$m.log 2>&1
  echo "PS=1 gate kernels $m rc=$? $(grep -h 'passed' $OUT/gk-$m.log | tail -1)"
  grep -h FAIL $OUT/gk-$m.log | head -5
done
gzip -f $OUT/gk-*.log
for m in 9b 35b-a3b 27b; do
  left 80 || break
  $B mkmodel --preset $m --type q4_k_m --vocab tests/data/tiny-dense.bf16.gguf -o $f >/dev/null 2>&1 || echo mkmodel failed
  $B eval -m $f --backend cuda --ctx 256 --tokens $TOK --all -o /tmp/ev-0.f32 2>/dev/null
  MEMRA_MMVQ_PS=1 $B eval -m $f --backend cuda --ctx 256 --tokens $TOK --all -o /tmp/ev-1.f32 2>/dev/null
  cmp /tmp/ev-0.f32 /tmp/ev-1.f32 && echo "$m eval 65 --all: MEMRA_MMVQ_PS=1 cmp-equal to the default"
  for r in 1 2; do
    for v in 0 1; do echo "$m d0 r$r [PS=$v] $(dec 0 MEMRA_MMVQ_PS=$v)"; done
  done
  rm -f $f /tmp/ev-*.f32
done
echo "t=$(( $(date +%s) - T0 ))"
