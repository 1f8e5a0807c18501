#!/bin/bash
# Session 32's fourth call: two opt-in switches, each the same bits as the default by construction:
#  MEMRA_MOE_BROUTE=1 (moe.cu block_route: the routed gate/up blocks rank the experts with every warp instead of
#  warp_route's K sequential rounds in one warp), MEMRA_ATT_PRE=1 (attention.cu: k_att_dec reads the batch arrays
#  and L2-prefetches its split's K / V rows before its wait; k_att_combine reads pos and the gate before its).
# Gated, logits cmp against the default, decode@0 A/B on 35b-a3b and 9b.
#   BUDGET=240 OUT=$OUT bash bench/next_run_route.sh   (carry .bin .fix; .bin/memra this tree, stripped, xz'd)
set -u
T0=$(date +%s); BUDGET=${BUDGET:-240}
left() { [ $(( $(date +%s) - T0 )) -lt $(( BUDGET - $1 )) ]; }
bash bench/unpack.sh .bin .fix
B=.bin/memra
nvidia-smi --query-gpu=name --format=csv,noheader
f=/tmp/m.gguf
dec() { env "$@" $B bench -m $f --backend cuda --prefill 16 --depth 0 --decode-tokens 64 --reps 3 2>&1 |
  grep '^decode' | tr -s ' '; }
TOK=$(python3 -c "import random; random.seed(7)
print(','.join(str(random.randrange(1000, 150000)) for _ in range(79)))")
BOTH="MEMRA_MOE_BROUTE=1 MEMRA_ATT_PRE=1"
for spec in "35b-a3b MEMRA_MOE_BROUTE=1 MEMRA_ATT_PRE=1 both" "9b MEMRA_ATT_PRE=1"; do
  set -- $spec; m=$1; shift
  left 60 || break
  $B mkmodel --preset $m --type q4_k_m --vocab tests/data/tiny-dense.bf16.gguf -o $f >/dev/null 2>&1 || echo mkmodel failed
  env $BOTH timeout 60 $B gate kernels --model $m --seed 341 >>$OUT/gk.log 2>&1
  echo "$BOTH gate kernels $m rc=$? $(grep -h 'passed' $OUT/gk.log | tail -1)"
  grep -h FAIL $OUT/gk.log | head
  $B eval -m $f --backend cuda --ctx 256 --tokens $TOK --all -o /tmp/ev-0.f32 2>/dev/null
  for v in "$@"; do
    e=$v; [ $v = both ] && e=$BOTH
    env $e $B eval -m $f --backend cuda --ctx 256 --tokens $TOK --all -o /tmp/ev-1.f32 2>/dev/null
    cmp /tmp/ev-0.f32 /tmp/ev-1.f32 && echo "$m eval 79 --all (last 15 on the decode path): [$v] cmp-equal to the default"
  done
  for r in 1 2; do
    for v in - "$@"; do
      e=; [ $v != - ] && e=$v; [ $v = both ] && e=$BOTH
      echo "$m r$r [$v] $(dec $e)"
    done
  done
  rm -f $f /tmp/ev-*.f32
done
gzip -f $OUT/gk.log
echo "t=$(( $(date +%s) - T0 ))"
