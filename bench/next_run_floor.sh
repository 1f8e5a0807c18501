#!/bin/bash
# Session 37 (~2 min on an H100; session 38 ran it in bench/results/logs/2026-12-07j-run1.sh): production's int8
# pair against a plain read of the same bytes, on one machine: stream_lab (read-only kernels back to back, in a
# graph, in a graph with PDL; 14-834 MB), then mmvq_tm_lab SWEEP=1 (variant 14: production's tile-major pair; 10:
# the matvec alone; 11: the prep alone) on 9b's decode shapes. Every output of mmvq_tm_lab must be memcmp-equal to
# variant 0's.
#   Build here:  for l in stream_lab mmvq_tm_lab; do BUILD=build-lab REBUILD=1 bash bench/kernels/lab.sh $l &&
#                  strip -o .bin/$l build-lab/$l; done; xz -T2 -6 -f .bin/stream_lab .bin/mmvq_tm_lab
#   Device:      OUT=$OUT bash bench/next_run_floor.sh   (carry .bin)
set -u
T0=$(date +%s)
bash bench/unpack.sh .bin
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
# (Session 38 ran this with "PATTERN_ONLY= " in front, which sets the variable and so stopped stream_lab after its
# load patterns: the k_read half never printed. stream_lab stops early whenever PATTERN_ONLY is set at all.)
timeout 60 .bin/stream_lab 2>&1 | grep -v "^k_pat\|^  pat" | tail -25
for sh in "4096 4096" "4096 12288" "12288 4096" "4096 24576"; do
  echo "== $sh"; SWEEP=1 timeout 40 .bin/mmvq_tm_lab $sh 2>&1 | tail -9
done
echo "t=$(( $(date +%s) - T0 ))"
