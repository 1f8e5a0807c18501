#!/bin/bash
# MEMRA_MOE_DNPF=1 (moe.cu moe_dnpf_on; opt-in, the same bits by construction): the MoE decode gate/up kernel
# triggers its dependent right after its wait, and k_moe_tc_down, launched then, routes the token from the
# router's logits and puts each warp's first expert rows in flight before its own wait. Gates under the switch
# (gate kernels 35b-a3b and 122b-a10b: moe_block rows against the CPU, batch invariance by memcmp; gate model),
# 35b-a3b q4_k_m eval logits cmp against the default (79 tokens --all), then decode@0 A/B in interleaved rounds.
#   BUDGET=330 OUT=$OUT bash bench/next_run_dnpf.sh   (carry .bin .fix; .bin/memra this tree, stripped, xz'd)
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
print(','.join(str(random.randrange(1000, 150000)) for _ in range(79)))")
MEMRA_MOE_DNPF=1 timeout 60 $B gate model --backend cuda --fixtures tests/data --fixtures .fix >$OUT/gm.log 2>&1
echo "DNPF=1 gate model rc=$? $(tail -1 $OUT/gm.log)"
for m in 35b-a3b 122b-a10b; do
  MEMRA_MOE_DNPF=1 timeout 90 $B gate kernels --model $m --seed 362 >$OUT/gk-$m.log 2>&1
  echo "DNPF=1 gate kernels $m rc=$? $(grep -h 'passed' $OUT/gk-$m.log | tail -1)"
  grep -h FAIL $OUT/gk-$m.log | head -5
  grep -h '^moe_block' $OUT/gk-$m.log | head -8
done
gzip -f $OUT/gk-*.log
$B mkmodel --preset 35b-a3b --type q4_k_m --vocab tests/data/tiny-dense.bf16.gguf -o $f >/dev/null 2>&1 || echo mkmodel failed
$B eval -m $f --backend cuda --ctx 256 --tokens $TOK --all -o /tmp/ev-0.f32 2>/dev/null
MEMRA_MOE_DNPF=1 $B eval -m $f --backend cuda --ctx 256 --tokens $TOK --all -o /tmp/ev-1.f32 2>/dev/null
cmp /tmp/ev-0.f32 /tmp/ev-1.f32 && echo "35b-a3b eval 79 --all: MEMRA_MOE_DNPF=1 cmp-equal to the default"
for r in 1 2 3; do
  left 40 || break
  for v in 0 1; do echo "35b-a3b d0 r$r [DNPF=$v] $(dec 0 MEMRA_MOE_DNPF=$v)"; done
done
echo "t=$(( $(date +%s) - T0 ))"
