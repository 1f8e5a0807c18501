#!/bin/bash
# MEMRA_MMVQ_PT=W (mmvq.cuh k_mmvq_tp; opt-in, the same bits by construction; written in session 34, not yet
# run): the T <= 2 tile-major int8 decode matvecs on a grid of at most sms x max(1, W / ks) blocks, each block
# walking several tiles with its warps' rings unbroken across them. W = 16 keeps k_mmvq_tm's residency (the walk
# alone); W = 12 and 8 leave room on every SM for the successor's early blocks (the co-residency reading of
# bench/results/2026-12-07f-h100.md). Gates under W = 16 and 8 (gate kernels: every T < 16 matmul against the
# CPU and T = 1 against larger batches by memcmp; gate model), eval logits cmp (65 tokens --all: a chunk of 64,
# then a T = 1 step), then decode@0 A/B in interleaved rounds.
#   BUDGET=480 OUT=$OUT bash bench/next_run_pt.sh   (carry .bin .fix; .bin/memra this tree, stripped, xz'd)
set -u
T0=$(date +%s); BUDGET=${BUDGET:-480}
left() { [ $(( $(date +%s) - T0 )) -lt $(( BUDGET - $1 )) ]; }
bash bench/unpack.sh .bin .fix
B=.bin/memra
nvidia-smi --query-gpu=name --format=csv,noheader
f=/tmp/m.gguf
dec() { local d=$1; shift; env "$@" $B bench -m $f --backend cuda --prefill 16 --depth $d --decode-tokens 64 --reps 3 2>&1 |
  grep '^decode' | tr -s ' '; }
TOK=$(python3 -c "import random; random.seed(7)
print(','.join(str(random.randrange(1000, 150000)) for _ in range(65)))")
MEMRA_MMVQ_PT=8 timeout 60 $B gate model --backend cuda --fixtures tests/data --fixtures .fix >$OUT/gm.log 2>&1
echo "PT=8 gate model rc=$? $(tail -1 $OUT/gm.log)"
for w in 16 8; do
  for m in 9b 27b 35b-a3b; do
    MEMRA_MMVQ_PT=$w timeout 90 $B gate kernels --model $m --seed 365 >$OUT/gk-$m-$w.log 2>&1
    echo "PT=$w gate kernels $m rc=$? $(grep -h 'passed' $OUT/gk-$m-$w.log | tail -1)"
    grep -h FAIL $OUT/gk-$m-$w.log | head -5
  done
done
cat $OUT/gk-*.log | gzip >$OUT/gk.log.gz; rm -f $OUT/gk-*.log
for m in 9b 35b-a3b 27b; do
  left 90 || break
  $B mkmodel --preset $m --type q4_k_m --vocab tests/data/tiny-dense.bf16.gguf -o $f >/dev/null 2>&1 || echo mkmodel failed
  $B eval -m $f --backend cuda --ctx 256 --tokens $TOK --all -o /tmp/ev-0.f32 2>/dev/null
  for w in 16 8; do
    MEMRA_MMVQ_PT=$w $B eval -m $f --backend cuda --ctx 256 --tokens $TOK --all -o /tmp/ev-1.f32 2>/dev/null
    cmp /tmp/ev-0.f32 /tmp/ev-1.f32 && echo "$m eval 65 --all: MEMRA_MMVQ_PT=$w cmp-equal to the default"
  done
  for r in 1 2; do
    left 50 || break
    echo "$m d0 r$r [default] $(dec 0)"
    for w in 16 12 8; do echo "$m d0 r$r [PT=$w] $(dec 0 MEMRA_MMVQ_PT=$w)"; done
  done
  rm -f $f /tmp/ev-*.f32
done
echo "t=$(( $(date +%s) - T0 ))"
