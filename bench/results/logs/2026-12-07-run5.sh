#!/bin/bash
# Run 5 (2026-12-07): the tight k_mmvq_tm for ks 5 and 6 as the default: gate kernels 27b, gate model, 27b logits
# cmp against MEMRA_MMVQ_TIGHT=0, decode@0 27b [-, TIGHT=0, TIGHT=5], two interleaved rounds.
#   OUT=$OUT bash bench/results/logs/2026-12-07-run5.sh   (carry .bin .fix)
set -u
bash bench/unpack.sh .bin .fix
B=.bin/memra
nvidia-smi --query-gpu=name --format=csv,noheader
timeout 60 $B gate kernels --model 27b --seed 210 >$OUT/gk.log 2>&1; echo "gate kernels 27b rc=$?"
timeout 60 $B gate model --backend cuda --fixtures tests/data --fixtures .fix >$OUT/gm.log 2>&1; echo "gate model rc=$?"
grep -hE "passed|FAIL" $OUT/gk.log $OUT/gm.log | head
f=/tmp/m27.gguf
$B mkmodel --preset 27b --type q4_k_m --vocab tests/data/tiny-dense.bf16.gguf -o $f >/dev/null 2>&1 || echo mkmodel failed
TOK=$(python3 -c "import random; random.seed(7)
print(','.join(str(random.randrange(1000, 150000)) for _ in range(66)))")
$B eval -m $f --backend cuda --ctx 256 --tokens $TOK --all -o /tmp/ev-0.f32 2>/dev/null
MEMRA_MMVQ_TIGHT=0 $B eval -m $f --backend cuda --ctx 256 --tokens $TOK --all -o /tmp/ev-1.f32 2>/dev/null
cmp /tmp/ev-0.f32 /tmp/ev-1.f32 && echo "27b eval 66 --all: MEMRA_MMVQ_TIGHT=0 logits cmp-equal to the default"
for r in 1 2; do
  for v in - MEMRA_MMVQ_TIGHT=0 MEMRA_MMVQ_TIGHT=5; do
    e=; [ $v != - ] && e=$v
    echo "27b q4_k_m r$r [$v] $(env $e $B bench -m $f --backend cuda --prefill 16 --depth 0 --decode-tokens 64 \
      --reps 3 2>&1 | grep '^decode' | tr -s ' ')"
  done
done
