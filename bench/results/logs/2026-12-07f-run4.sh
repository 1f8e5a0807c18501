#!/bin/bash
# MEMRA_MMVQ_PS after run 3 (-21% on 9b): =1 now copies 2^-e by a 4-byte cp.async (run 3's load + store held
# each warp an L2 round trip before its ring's next request); =2 launches the staged instances with their
# shared memory but reads the activations as the plain form does (what the larger shared memory alone costs).
# gate kernels 9b and 27b and 9b eval logits cmp under =1, then decode@0 A/B of 0 / 1 / 2 in interleaved rounds.
#   BUDGET=300 OUT=$OUT bash bench/next_run_ps2.sh   (carry .bin .fix; .bin/memra this tree, stripped, xz'd)
set -u
T0=$(date +%s); BUDGET=${BUDGET:-300}
left() { [ $(( $(date +%s) - T0 )) -lt $(( BUDGET - $1 )) ]; }
bash bench/unpack.sh .bin .fix
B=.bin/memra
nvidia-smi --query-gpu=name --format=csv,noheader
f=/tmp/m.gguf
dec() { local d=$1; shift; env "$@" $B bench -m $f --backend cuda --prefill 16 --depth $d --decode-tokens 64 --reps 3 2>&1 |
  grep '^decode' | tr -s ' '; }
TOK=$(python3 -c "import random; random.seed(7)
print(','.join(str(random.randrange(1000, 150000)) for _ in range(65)))")
for m in 9b 27b; do
  MEMRA_MMVQ_PS=1 timeout 90 $B gate kernels --model $m --seed 364 >$OUT/gk-$m.log 2>&1
  echo "PS=1 gate kernels $m rc=$? $(grep -h 'passed' $OUT/gk-$m.log | tail -1)"
  grep -h FAIL $OUT/gk-$m.log | head -5
done
gzip -f $OUT/gk-*.log
for m in 9b 35b-a3b; do
  left 60 || break
  $B mkmodel --preset $m --type q4_k_m --vocab tests/data/tiny-dense.bf16.gguf -o $f >/dev/null 2>&1 || echo mkmodel failed
  $B eval -m $f --backend cuda --ctx 256 --tokens $TOK --all -o /tmp/ev-0.f32 2>/dev/null
  MEMRA_MMVQ_PS=1 $B eval -m $f --backend cuda --ctx 256 --tokens $TOK --all -o /tmp/ev-1.f32 2>/dev/null
  cmp /tmp/ev-0.f32 /tmp/ev-1.f32 && echo "$m eval 65 --all: MEMRA_MMVQ_PS=1 cmp-equal to the default"
  for r in 1 2; do
    for v in 0 1 2; do echo "$m d0 r$r [PS=$v] $(dec 0 MEMRA_MMVQ_PS=$v)"; done
  done
  rm -f $f /tmp/ev-*.f32
done
echo "t=$(( $(date +%s) - T0 ))"
