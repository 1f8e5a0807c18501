#!/bin/bash
# Written in session 36, not run yet: mmvq_tm_lab's variants 21, 22 (k_tx: the bulk-copy ring whose slots also
# carry the prep's planes and per-limb sums, read by mmvq_sb_lean) against production's pairs (0: file layout,
# 14: tile-major, k_mmvq_tm), the cp.async ring (7) and the plain bulk ring (2), on the 9b and 27b decode
# shapes. Every output must be memcmp-equal to variant 0's ("== first yes"). If 21 or 22 beats 14 by more than
# a few percent on most shapes, port it to k_mmvq_tm (T <= 2, TL = 1) behind a switch and A/B the step.
#   BUILD=build-lab REBUILD=1 bash bench/kernels/lab.sh mmvq_tm_lab && strip -o .bin/mmvq_tm_lab build-lab/mmvq_tm_lab
#   && xz -T2 -6 -f .bin/mmvq_tm_lab;  then on the device:  bash bench/next_run_ringx.sh   (carry .bin, ~1 min)
set -u
bash bench/unpack.sh .bin
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
for sh in "4096 12288" "12288 4096" "4096 4096" "4096 8192" "5120 17408" "17408 5120" "6144 5120"; do
  echo "== $sh"; RINGX=1 timeout 90 .bin/mmvq_tm_lab $sh; echo "rc=$?"
done
