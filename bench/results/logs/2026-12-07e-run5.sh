#!/bin/bash
# Attention decode at depth (attention.cu, the same bits by construction): ATT_BLOCKS 128 -> 512 (a phase-1 block
# per split up to 512 / n_kv splits), a split's V rows requested VB at a time (64 / 32 / 16 by G) instead of 16,
# and k_att_combine loading 16 splits at once. Per file: logits cmp against the base binary (79 tokens --all; the
# last position of 4,111 tokens, whose last 15 run k_att_dec at depth 4,096), then decode A/B (base / new) at
# depth 0 and 4096 in two interleaved rounds, and once at depth 0 in a 32k context (--ctx: the full grid).
#   BUDGET=540 OUT=$OUT bash bench/next_run_att.sh   (carry .bin .fix; .bin/memra this tree, .bin/memra-base HEAD)
set -u
T0=$(date +%s); BUDGET=${BUDGET:-540}
left() { [ $(( $(date +%s) - T0 )) -lt $(( BUDGET - $1 )) ]; }
bash bench/unpack.sh .bin .fix
B=.bin/memra; B0=.bin/memra-base
nvidia-smi --query-gpu=name --format=csv,noheader
f=/tmp/m.gguf
dec() { local b=$1; shift; $b bench -m $f --backend cuda --prefill 16 --decode-tokens 64 --reps 3 "$@" 2>&1 |
  grep '^decode' | tr -s ' ' | tr '\n' ';'; }
toks() { python3 -c "import random; random.seed($2)
print(','.join(str(random.randrange(1000, 150000)) for _ in range($1)))"; }
T79=$(toks 79 7); T4K=$(toks 4111 8)
timeout 60 $B gate model --backend cuda --fixtures tests/data --fixtures .fix >$OUT/gm.log 2>&1
echo "gate model rc=$? $(tail -1 $OUT/gm.log)"
for m in 9b 35b-a3b 27b; do
  left 150 || break
  $B mkmodel --preset $m --type q4_k_m --vocab tests/data/tiny-dense.bf16.gguf -o $f >/dev/null 2>&1 || echo mkmodel failed
  for b in $B0 $B; do $b eval -m $f --backend cuda --ctx 256 --tokens $T79 --all -o /tmp/ev79-$(basename $b).f32 2>/dev/null; done
  cmp /tmp/ev79-memra-base.f32 /tmp/ev79-memra.f32 && echo "$m eval 79 --all: cmp-equal to the base"
  for b in $B0 $B; do $b eval -m $f --backend cuda --ctx 4608 --tokens $T4K -o /tmp/ev4k-$(basename $b).f32 2>/dev/null; done
  cmp /tmp/ev4k-memra-base.f32 /tmp/ev4k-memra.f32 && echo "$m eval 4111 (last position): cmp-equal to the base"
  ls -la /tmp/ev4k-*.f32 | awk '{print $5}' | tr '\n' ' '; echo
  for r in 1 2; do
    echo "$m r$r [base] $(dec $B0 --depth 0,4096)"
    echo "$m r$r [new] $(dec $B --depth 0,4096)"
  done
  left 60 && echo "$m ctx32k [base] $(dec $B0 --depth 0 --ctx 32768)" && echo "$m ctx32k [new] $(dec $B --depth 0 --ctx 32768)"
  rm -f $f /tmp/ev*.f32
done
echo "t=$(( $(date +%s) - T0 ))"
