#!/bin/bash
# Session 37, run 2 (~4 min on an H100): mmvq_sb6 with one MMA a sub-block (the halves' sums in separate B
# columns), which must be bit-equal to the old form (mmvq_sb6_ref) at every T.
#  .bin/memra0: d38e761 (old mmvq_sb6); .bin/memra: this tree; .bin/sb_lab: V5-V8 (V7, V8 new, bit-equal to V5).
#  1. sb_lab.  2. gate kernels 9b and 27b.  3. per file (9b, 27b q4_k_m): logits of 66 tokens (--all: a chunk of
#  64, then T = 2 through the Q6_K layers) cmp-equal to memra0's; decode@0 in interleaved rounds.
#   Device:      BUDGET=420 OUT=$OUT bash bench/next_run_q6.sh   (carry .bin)
set -u
T0=$(date +%s); BUDGET=${BUDGET:-420}
left() { [ $(( $(date +%s) - T0 )) -lt $(( BUDGET - $1 )) ]; }
bash bench/unpack.sh .bin
B=.bin/memra
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
timeout 60 .bin/sb_lab >$OUT/sb_lab.txt 2>&1; echo "sb_lab rc=$?"; grep -A3 "^V[5-8]" $OUT/sb_lab.txt; tail -1 $OUT/sb_lab.txt
for m in 9b 27b; do
  timeout 120 $B gate kernels --model $m --seed 371 >$OUT/gk-$m.log 2>&1
  echo "gate kernels $m rc=$? $(grep -h 'passed' $OUT/gk-$m.log | tail -1)"
  grep -h FAIL $OUT/gk-$m.log | head -5
done
cat $OUT/gk-*.log | gzip >$OUT/gk.log.gz; rm -f $OUT/gk-*.log
f=/tmp/m.gguf
dec() { local b=$1; shift; env "$@" $b bench -m $f --backend cuda --prefill 16 --depth 0 --decode-tokens 64 \
  --reps 3 2>&1 | grep '^decode' | tr -s ' '; }
TOK=$(python3 -c "import random; random.seed(7)
print(','.join(str(random.randrange(1000, 150000)) for _ in range(66)))")
for m in 9b 27b; do
  left 100 || break
  $B mkmodel --preset $m --type q4_k_m --vocab tests/data/tiny-dense.bf16.gguf -o $f >/dev/null 2>&1 ||
    echo mkmodel failed
  .bin/memra0 eval -m $f --backend cuda --ctx 256 --tokens $TOK --all -o /tmp/ev-r.f32 2>/dev/null
  $B eval -m $f --backend cuda --ctx 256 --tokens $TOK --all -o /tmp/ev-0.f32 2>/dev/null
  cmp /tmp/ev-r.f32 /tmp/ev-0.f32 && echo "$m eval 66 --all: cmp-equal to memra0 ($(stat -c %s /tmp/ev-0.f32) bytes)"
  for r in 1 2 3; do
    left 30 || break
    echo "$m d0 r$r [memra0] $(dec .bin/memra0 MEMRA_NONE=0)"
    echo "$m d0 r$r [memra] $(dec $B MEMRA_NONE=0)"
  done
  rm -f $f /tmp/ev-*.f32
done
echo "t=$(( $(date +%s) - T0 ))"
