#!/bin/bash
# MEMRA_CARVEOUT=P (common.cuh cuda_carveout_set; opt-in, the same bits by construction): every kernel's
# preferred shared-memory carveout set to P% at its first launch, so consecutive kernels of a step share one
# L1 / shared split. gate model and 9b eval logits cmp under =100, then decode@0 A/B (default / 100 / 50) in
# interleaved rounds on 9b, 35b-a3b and 27b q4_k_m.
#   BUDGET=330 OUT=$OUT bash bench/next_run_carveout.sh   (carry .bin .fix; .bin/memra this tree, stripped, xz'd)
set -u
T0=$(date +%s); BUDGET=${BUDGET:-330}
left() { [ $(( $(date +%s) - T0 )) -lt $(( BUDGET - $1 )) ]; }
bash bench/unpack.sh .bin .fix
B=.bin/memra
nvidia-smi --query-gpu=name --format=csv,noheader
f=/tmp/m.gguf
dec() { local d=$1; shift; env "$@" $B bench -m $f --backend cuda --prefill 16 --depth $d --decode-tokens 64 --reps 3 2>&1 |
  grep '^decode' | tr -s ' '; }
TOK=$(python3 -c "import random; random.seed(7)
print(','.join(str(random.randrange(1000, 150000)) for _ in range(65)))")
MEMRA_CARVEOUT=100 timeout 60 $B gate model --backend cuda --fixtures tests/data --fixtures .fix >$OUT/gm.log 2>&1
echo "CARVEOUT=100 gate model rc=$? $(tail -1 $OUT/gm.log)"
for m in 9b 35b-a3b 27b; do
  left 70 || break
  $B mkmodel --preset $m --type q4_k_m --vocab tests/data/tiny-dense.bf16.gguf -o $f >/dev/null 2>&1 || echo mkmodel failed
  if [ $m = 9b ]; then
    $B eval -m $f --backend cuda --ctx 256 --tokens $TOK --all -o /tmp/ev-0.f32 2>/dev/null
    MEMRA_CARVEOUT=100 $B eval -m $f --backend cuda --ctx 256 --tokens $TOK --all -o /tmp/ev-1.f32 2>/dev/null
    cmp /tmp/ev-0.f32 /tmp/ev-1.f32 && echo "$m eval 65 --all: MEMRA_CARVEOUT=100 cmp-equal to the default"
  fi
  for r in 1 2; do
    left 40 || break
    echo "$m d0 r$r [default] $(dec 0)"
    for v in 100 50; do echo "$m d0 r$r [CARVEOUT=$v] $(dec 0 MEMRA_CARVEOUT=$v)"; done
  done
  rm -f $f /tmp/ev-*.f32
done
echo "t=$(( $(date +%s) - T0 ))"
