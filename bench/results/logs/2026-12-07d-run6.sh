#!/bin/bash
# Session 32's fifth call: MEMRA_MOE_BROUTE=1 with block_route's loops unrolled (round 2 over the candidates'
# keys and ids in 16-byte loads, round 1's shuffles unrolled): gate kernels 35b-a3b, logits cmp, decode@0 A/B.
#   OUT=$OUT bash bench/next_run_broute.sh   (carry .bin .fix; .bin/memra this tree, stripped, xz'd)
set -u
T0=$(date +%s)
bash bench/unpack.sh .bin .fix
B=.bin/memra
nvidia-smi --query-gpu=name --format=csv,noheader
f=/tmp/m.gguf
dec() { env "$@" $B bench -m $f --backend cuda --prefill 16 --depth 0 --decode-tokens 64 --reps 3 2>&1 |
  grep '^decode' | tr -s ' '; }
TOK=$(python3 -c "import random; random.seed(7)
print(','.join(str(random.randrange(1000, 150000)) for _ in range(79)))")
$B mkmodel --preset 35b-a3b --type q4_k_m --vocab tests/data/tiny-dense.bf16.gguf -o $f >/dev/null 2>&1 || echo mkmodel failed
MEMRA_MOE_BROUTE=1 timeout 60 $B gate kernels --model 35b-a3b --seed 351 >$OUT/gk.log 2>&1
echo "MEMRA_MOE_BROUTE=1 gate kernels 35b-a3b rc=$? $(grep -h 'passed' $OUT/gk.log | tail -1)"
grep -h FAIL $OUT/gk.log | head
$B eval -m $f --backend cuda --ctx 256 --tokens $TOK --all -o /tmp/ev-0.f32 2>/dev/null
MEMRA_MOE_BROUTE=1 $B eval -m $f --backend cuda --ctx 256 --tokens $TOK --all -o /tmp/ev-1.f32 2>/dev/null
cmp /tmp/ev-0.f32 /tmp/ev-1.f32 && echo "35b-a3b eval 79 --all (last 15 on the decode path): MEMRA_MOE_BROUTE=1 cmp-equal to the default"
for r in 1 2 3; do
  for v in - MEMRA_MOE_BROUTE=1; do
    e=; [ $v != - ] && e=$v
    echo "35b-a3b r$r [$v] $(dec $e)"
  done
done
gzip -f $OUT/gk.log
echo "t=$(( $(date +%s) - T0 ))"
