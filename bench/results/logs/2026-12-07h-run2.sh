#!/bin/bash
# Session 36, run 2: bench/kernels/sb_lab.cu (BUILD=build-lab REBUILD=1 bash bench/kernels/lab.sh sb_lab, stripped
# into .bin/sb_lab): the T = 1 int8 matvec's cost a super-block with the weights in shared memory (latency of one
# warp, throughput of full grids), production against a lean form; then the SASS of the lab's loops.
#   OUT=$OUT bash bench/results/logs/2026-12-07h-run2.sh   (carry .bin)
set -u
bash bench/unpack.sh .bin
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
timeout 120 .bin/sb_lab; echo "rc=$?"
export PATH=$PATH:/usr/local/cuda/bin
cuobjdump -sass .bin/sb_lab 2>/dev/null | awk '/Function : /{p = ($0 ~ /k_sb/)} p' > $OUT/sass-sb.txt
awk '/Function : /{f=$3} /clock|CS2R.*SR_CLOCK/{print f, $0}' $OUT/sass-sb.txt | head -20
xz -6 -f $OUT/sass-sb.txt
