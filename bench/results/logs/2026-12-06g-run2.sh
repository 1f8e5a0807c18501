#!/bin/bash
# Session 26, run 2 (bench/next_q6tm_run.sh): Q6_K matmul weights tile-major, their T < 16 matmuls on the int8
# matvec through k_mmvq_tm's ring (the new default). One call from the repo root with .bin/memra (built from this
# tree, stripped) and .fix carried xz'd; parts in order of need, each skipped when BUDGET seconds would be passed:
#   1. gate kernels 9b, 27b, 35b-a3b, 0.8b (their Q6_K weights tile-major now) and gate model;
#   2. per model (9b, 27b, 35b-a3b q4_k_m): logits of 66 tokens (eval --all: a chunk of 64, then T = 2) must be
#      cmp-equal to MEMRA_TILED=0 MEMRA_MMVQ6=1 (the int8 Q6_K path on the file's layout: the same arithmetic,
#      so every tile-major Q6_K reader, GEMM and mmvg included, must give its bits); then decode@0 and prefill 512
#      against MEMRA_MMVQ6=0 (the previous default: Q6_K in the file's order on mmv6), two interleaved rounds.
set -u
T0=$(date +%s); BUDGET=${BUDGET:-500}
left() { [ $(( $(date +%s) - T0 )) -lt $(( BUDGET - $1 )) ]; }
OUT=${OUT:-/tmp/next-run}; mkdir -p $OUT
bash bench/unpack.sh .bin .fix
B=.bin/memra
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
for gm in 9b 27b 35b-a3b 0.8b; do
  timeout 60 $B gate kernels --model $gm --seed 200 >>$OUT/gk.log 2>&1; echo "gate kernels $gm rc=$?"
done
timeout 60 $B gate model --backend cuda --fixtures tests/data --fixtures .fix >$OUT/gm.log 2>&1
echo "gate model rc=$?"
grep -E "passed|FAIL" $OUT/gk.log $OUT/gm.log | head -20
echo "t=$(( $(date +%s) - T0 ))"
TOK=$(python3 -c "import random; random.seed(7); print(','.join(str(random.randrange(1000, 150000)) for _ in range(66)))")
for m in 9b 27b 35b-a3b; do
  left 110 || break
  f=/tmp/ab-$m.gguf
  $B mkmodel --preset $m --type q4_k_m --vocab tests/data/tiny-dense.bf16.gguf -o $f >/dev/null 2>&1 ||
    echo mkmodel failed
  $B eval -m $f --backend cuda --ctx 256 --tokens $TOK --all -o /tmp/ev-tm.f32 2>>$OUT/ab.log
  MEMRA_TILED=0 MEMRA_MMVQ6=1 $B eval -m $f --backend cuda --ctx 256 --tokens $TOK --all -o /tmp/ev-file.f32 \
    2>>$OUT/ab.log
  cmp /tmp/ev-tm.f32 /tmp/ev-file.f32 && echo "$m eval 66 --all: tile-major Q6_K == MEMRA_TILED=0 MEMRA_MMVQ6=1"
  rm -f /tmp/ev-*.f32
  for r in 1 2; do
    for v in - MEMRA_MMVQ6=0; do
      e=; [ $v != - ] && e=$v
      d=$(env $e $B bench -m $f --backend cuda --prefill 16 --depth 0 --decode-tokens 64 --reps 3 2>&1 |
        tee -a $OUT/ab.log | grep '^decode' | tr -s ' ')
      p=$(env $e $B bench -m $f --backend cuda --prefill 512 --depth 0 --decode-tokens 1 --reps 2 2>&1 |
        tee -a $OUT/ab.log | grep '^prefill' | tr -s ' ')
      echo "$m q4_k_m r$r [$v] $d | $p"
    done
  done
  rm -f $f
  echo "t=$(( $(date +%s) - T0 ))"
done 2>&1 | tee $OUT/ab.txt
