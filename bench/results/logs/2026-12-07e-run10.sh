#!/bin/bash
# k_att_dec's q heads split over blocks (attention.cu att_dec_gb; the same bits by construction): by default 4
# heads a block where G is a multiple of 4 (35b-a3b: 2 blocks a kv head and split), MEMRA_ATT_GB=N for others.
# Per file: logits cmp against the base (b66bc00) for the default and the variant, then decode at depth 0 and
# 4096, base / new / new with the variant, two interleaved rounds.
#   BUDGET=250 OUT=$OUT bash bench/next_run_att4.sh   (carry .bin .fix; .bin/memra this tree, .bin/memra-base)
set -u
T0=$(date +%s); BUDGET=${BUDGET:-250}
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
for spec in "35b-a3b 8" "9b 2" "27b 3"; do
  set -- $spec; m=$1; gb=$2
  left 75 || break
  $B mkmodel --preset $m --type q4_k_m --vocab tests/data/tiny-dense.bf16.gguf -o $f >/dev/null 2>&1 || echo mkmodel failed
  $B0 eval -m $f --backend cuda --ctx 4608 --tokens $T4K -o /tmp/ev4k-0.f32 2>/dev/null
  $B0 eval -m $f --backend cuda --ctx 256 --tokens $T79 --all -o /tmp/ev79-0.f32 2>/dev/null
  for e in MEMRA_ATT_GB=0 MEMRA_ATT_GB=$gb; do
    env $e $B eval -m $f --backend cuda --ctx 4608 --tokens $T4K -o /tmp/ev4k-1.f32 2>/dev/null
    env $e $B eval -m $f --backend cuda --ctx 256 --tokens $T79 --all -o /tmp/ev79-1.f32 2>/dev/null
    cmp /tmp/ev4k-0.f32 /tmp/ev4k-1.f32 && cmp /tmp/ev79-0.f32 /tmp/ev79-1.f32 &&
      echo "$m [$e] eval 4111 (last) and 79 --all: cmp-equal to the base"
  done
  for r in 1 2; do
    echo "$m r$r depth 0 / 4096: [base] $(dec $B0) [new] $(dec $B) [GB=$gb] $(dec $B MEMRA_ATT_GB=$gb)"
  done
  rm -f $f /tmp/ev*.f32
done
echo "t=$(( $(date +%s) - T0 ))"
