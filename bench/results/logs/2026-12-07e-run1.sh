#!/bin/bash
# MEMRA_EARLY (common.cuh cuda_early; opt-in, the same bits by construction): =1 k_gdn and k_att_dec trigger
# their dependents after their waits and k_att_combine at its start, so the output projection's prep and matvec
# launch while GDN / attention run; =2 also gives that matvec (ssm_out, attn_output, Q4_K tile-major) a ring
# deep enough to request its whole K range before its wait. Per file: eval logits cmp against the default, then
# decode@0 A/B (default / 1 / 2) in two interleaved rounds; 9b also at depth 4096; gate model under =2.
#   BUDGET=420 OUT=$OUT bash bench/next_run_early.sh   (carry .bin .fix; .bin/memra this tree, stripped, xz'd)
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
print(','.join(str(random.randrange(1000, 150000)) for _ in range(79)))")
MEMRA_EARLY=2 timeout 60 $B gate model --backend cuda --fixtures tests/data --fixtures .fix >$OUT/gm.log 2>&1
echo "MEMRA_EARLY=2 gate model rc=$? $(tail -1 $OUT/gm.log)"
for m in 9b 35b-a3b 27b; do
  left 90 || break
  $B mkmodel --preset $m --type q4_k_m --vocab tests/data/tiny-dense.bf16.gguf -o $f >/dev/null 2>&1 || echo mkmodel failed
  $B eval -m $f --backend cuda --ctx 256 --tokens $TOK --all -o /tmp/ev-0.f32 2>/dev/null
  for v in 1 2; do
    MEMRA_EARLY=$v $B eval -m $f --backend cuda --ctx 256 --tokens $TOK --all -o /tmp/ev-1.f32 2>/dev/null
    cmp /tmp/ev-0.f32 /tmp/ev-1.f32 && echo "$m eval 79 --all: MEMRA_EARLY=$v cmp-equal to the default"
  done
  for r in 1 2; do
    for v in 0 1 2; do echo "$m d0 r$r [EARLY=$v] $(dec 0 MEMRA_EARLY=$v)"; done
  done
  if [ $m = 9b ] && left 150; then
    for v in 0 2; do echo "$m d4096 [EARLY=$v] $(dec 4096 MEMRA_EARLY=$v)"; done
  fi
  rm -f $f /tmp/ev-*.f32
done
echo "t=$(( $(date +%s) - T0 ))"
