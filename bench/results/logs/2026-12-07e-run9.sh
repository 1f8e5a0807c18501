#!/bin/bash
# Attention decode at depth, step 3 (attention.cu, the same bits by construction): k_att_dec's value loop reads
# a head's weights four at a time (one 16-byte shared load instead of four; ncu, run 8: k_att_dec at depth 4096
# is one wave at 25% occupancy, 13.6 cycles an issued instruction). Per file: logits cmp against the base
# (b66bc00; 79 tokens --all, and the last position of 4,111), then decode at depth 0 and 4096, base / new,
# three interleaved rounds.
#   BUDGET=300 OUT=$OUT bash bench/next_run_att3.sh   (carry .bin .fix; .bin/memra this tree, .bin/memra-base)
set -u
T0=$(date +%s); BUDGET=${BUDGET:-300}
left() { [ $(( $(date +%s) - T0 )) -lt $(( BUDGET - $1 )) ]; }
bash bench/unpack.sh .bin .fix
B=.bin/memra; B0=.bin/memra-base
nvidia-smi --query-gpu=name --format=csv,noheader
f=/tmp/m.gguf
dec() { local b=$1; shift; env "$@" $b bench -m $f --backend cuda --prefill 16 --decode-tokens 64 --reps 3 \
  --depth 0,4096 2>&1 | grep '^decode' | tr -s ' ' | cut -d' ' -f3,4 | tr '\n' ' '; }
toks() { python3 -c "import random; random.seed($2)
print(','.join(str(random.randrange(1000, 150000)) for _ in range($1)))"; }
T79=$(toks 79 7); T4K=$(toks 4111 8)
timeout 60 $B gate model --backend cuda --fixtures tests/data --fixtures .fix >$OUT/gm.log 2>&1
echo "gate model rc=$? $(tail -1 $OUT/gm.log)"
for m in 9b 35b-a3b 27b; do
  left 90 || break
  $B mkmodel --preset $m --type q4_k_m --vocab tests/data/tiny-dense.bf16.gguf -o $f >/dev/null 2>&1 || echo mkmodel failed
  for b in $B0 $B; do $b eval -m $f --backend cuda --ctx 256 --tokens $T79 --all -o /tmp/ev79-$(basename $b).f32 2>/dev/null; done
  cmp /tmp/ev79-memra-base.f32 /tmp/ev79-memra.f32 && echo "$m eval 79 --all: cmp-equal to the base"
  for b in $B0 $B; do $b eval -m $f --backend cuda --ctx 4608 --tokens $T4K -o /tmp/ev4k-$(basename $b).f32 2>/dev/null; done
  cmp /tmp/ev4k-memra-base.f32 /tmp/ev4k-memra.f32 && echo "$m eval 4111 (last position): cmp-equal to the base"
  for r in 1 2 3; do
    echo "$m r$r tok/s at depth 0 / 4096: [base] $(dec $B0) [new] $(dec $B)"
  done
  rm -f $f /tmp/ev*.f32
done
echo "t=$(( $(date +%s) - T0 ))"
