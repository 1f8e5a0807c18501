#!/bin/bash
# MEMRA_MMVQ_PLPF=1 (mmvq.cuh mmvq_planes_pf / mmvq_y_pf; opt-in, the same bits by construction): k_mmvq_tm and
# k_mmvq_tm2 prefetch their warps' planes and the block's residual rows into L1 right after the wait. Per file:
# eval logits of this tree (default, PLPF=1) cmp against the base binary (HEAD), then decode@0 A/B (base /
# default / PLPF=1) in two interleaved rounds; gate model under PLPF=1.
#   BUDGET=360 OUT=$OUT bash bench/next_run_plpf.sh   (carry .bin .fix; .bin/memra this tree, .bin/memra-base HEAD)
set -u
T0=$(date +%s); BUDGET=${BUDGET:-360}
left() { [ $(( $(date +%s) - T0 )) -lt $(( BUDGET - $1 )) ]; }
bash bench/unpack.sh .bin .fix
B=.bin/memra; B0=.bin/memra-base
nvidia-smi --query-gpu=name --format=csv,noheader
f=/tmp/m.gguf
dec() { local b=$1; shift; env "$@" $b bench -m $f --backend cuda --prefill 16 --depth 0 --decode-tokens 64 --reps 3 2>&1 |
  grep '^decode' | tr -s ' '; }
TOK=$(python3 -c "import random; random.seed(7)
print(','.join(str(random.randrange(1000, 150000)) for _ in range(79)))")
MEMRA_MMVQ_PLPF=1 timeout 60 $B gate model --backend cuda --fixtures tests/data --fixtures .fix >$OUT/gm.log 2>&1
echo "MEMRA_MMVQ_PLPF=1 gate model rc=$? $(tail -1 $OUT/gm.log)"
for m in 9b 27b 35b-a3b; do
  left 80 || break
  $B mkmodel --preset $m --type q4_k_m --vocab tests/data/tiny-dense.bf16.gguf -o $f >/dev/null 2>&1 || echo mkmodel failed
  $B0 eval -m $f --backend cuda --ctx 256 --tokens $TOK --all -o /tmp/ev-0.f32 2>/dev/null
  for v in 0 1; do
    MEMRA_MMVQ_PLPF=$v $B eval -m $f --backend cuda --ctx 256 --tokens $TOK --all -o /tmp/ev-1.f32 2>/dev/null
    cmp /tmp/ev-0.f32 /tmp/ev-1.f32 && echo "$m eval 79 --all: this tree, MEMRA_MMVQ_PLPF=$v, cmp-equal to the base"
  done
  for r in 1 2; do
    echo "$m r$r [base] $(dec $B0)"
    echo "$m r$r [new] $(dec $B)"
    echo "$m r$r [new PLPF=1] $(dec $B MEMRA_MMVQ_PLPF=1)"
  done
  rm -f $f /tmp/ev-*.f32
done
echo "t=$(( $(date +%s) - T0 ))"
