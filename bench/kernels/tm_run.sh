#!/bin/bash
# One device call for the tile-major question (bench/results/2026-12-03f-h200.md,
# "What would close the gap"; answered in 2026-12-03g-h200.md): mmvq_tm_lab on
# the 9b / 27b decode shapes and the 9B output head, then stream_lab's
# load-pattern tables (PATTERN_ONLY).
# Binaries built beforehand (no GPU needed):
#   BUILD=DIR REBUILD=1 bash bench/kernels/lab.sh mmvq_tm_lab
#   BUILD=DIR REBUILD=1 bash bench/kernels/lab.sh stream_lab
#   bash bench/kernels/tm_run.sh DIR
# Logs go to $OUT (the device tool's output folder) or /tmp/tm-out; a short
# table is printed last.
OUT=${OUT:-/tmp/tm-out}
mkdir -p "$OUT"
B=${1:-.bin}
rc=0
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader 2>&1 | tee "$OUT/gpu.txt"
for shape in "4096 12288" "12288 4096" "5120 17408" "17408 5120" "4096 248320"; do
    timeout 90 "$B/mmvq_tm_lab" $shape >> "$OUT/tm.txt" 2>&1 || rc=1
done
PATTERN_ONLY=1 timeout 120 "$B/stream_lab" > "$OUT/pattern.txt" 2>&1 || rc=1
grep -E "^mmvq_tm_lab|^int8|^registers|^bulk|^cp.async|FAIL" "$OUT/tm.txt"
grep -E "^  \{|ks|^Q6_K" "$OUT/pattern.txt"
echo "tm_run rc=$rc"
exit $rc
