#!/bin/bash
# What bounds attention decode at depth 4096 (9b q4_k_m; 33.5 MB of fp32 cache a layer, ~31 us in the step):
# ncu's speed-of-light, occupancy, warp-state, memory and source (stall sampling) sections of k_att_dec and
# k_att_combine launches of the depth-4096 decode steps (the warm-up's shallow ones skipped).
#   BUDGET=240 OUT=$OUT bash bench/next_run_attncu.sh   (carry .bin .fix; .bin/memra this tree, stripped, xz'd)
set -u
T0=$(date +%s)
bash bench/unpack.sh .bin .fix
B=.bin/memra
nvidia-smi --query-gpu=name --format=csv,noheader
which ncu || ls /usr/local/cuda/bin/ncu
f=/tmp/m.gguf
$B mkmodel --preset 9b --type q4_k_m --vocab tests/data/tiny-dense.bf16.gguf -o $f >/dev/null 2>&1 || echo mkmodel failed
for k in dec combine; do
  timeout 120 ncu -k regex:k_att_$k --launch-skip 48 -c 3 --section SpeedOfLight --section Occupancy \
    --section LaunchStats --section WarpStateStats --section MemoryWorkloadAnalysis --section SourceCounters \
    $B bench -m $f --backend cuda --prefill 16 --depth 4096 --decode-tokens 8 --reps 1 >$OUT/ncu-$k.txt 2>&1
  echo "ncu k_att_$k rc=$? $(grep -E '^ +(Duration|Grid Size|Memory Throughput|DRAM Throughput|Achieved Occupancy)' \
    $OUT/ncu-$k.txt | tr -s ' ' | tr '\n' ';')"
done
echo "t=$(( $(date +%s) - T0 ))"
