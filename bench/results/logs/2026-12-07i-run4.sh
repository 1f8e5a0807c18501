#!/bin/bash
# Session 37, run 4: which change made 9b q4_k_m 2.6% slower in run 2? memra0 (PX template present, old
# mmvq_sb6), memraH (d38e761's kernels: PX removed, old mmvq_sb6), memra (PX removed, one-MMA mmvq_sb6), decode@0
# in interleaved rounds, then 27b likewise if time allows.
#   Device:      OUT=$OUT bash bench/next_run_q6ab.sh   (carry .bin)
set -u
T0=$(date +%s); BUDGET=${BUDGET:-300}
left() { [ $(( $(date +%s) - T0 )) -lt $(( BUDGET - $1 )) ]; }
bash bench/unpack.sh .bin
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
f=/tmp/m.gguf
dec() { .bin/$1 bench -m $f --backend cuda --prefill 16 --depth 0 --decode-tokens 64 --reps 3 2>&1 | grep '^decode' |
  tr -s ' '; }
for m in 9b 27b; do
  left 120 || break
  .bin/memra mkmodel --preset $m --type q4_k_m --vocab tests/data/tiny-dense.bf16.gguf -o $f >/dev/null 2>&1
  for r in 1 2 3; do
    left 30 || break
    for b in memra0 memraH memra; do echo "$m d0 r$r [$b] $(dec $b)"; done
  done
  rm -f $f
done
echo "t=$(( $(date +%s) - T0 ))"
