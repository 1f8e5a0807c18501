#!/bin/bash
# One device call: (build,) kernel gate against the CPU reference, and the
# decode matvec timing table. Logs go to $OUT (the device tool's output
# folder) or /tmp/gate-out.
#
#   bash bench/gpu_gate.sh            build with make -j16 CUDA_ARCH=sm_90a, then gate
#   bash bench/gpu_gate.sh DIR        use DIR/memra built elsewhere (DIR/lib: its shared libs)
#
# The gate's options can be passed in GATE_ARGS (default: --bench --seed 1).
set -o pipefail
OUT=${OUT:-/tmp/gate-out}
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,memory.total --format=csv 2>&1 | tee "$OUT/gpu.txt"
if [ -n "$1" ]; then
    BIN="$1/memra"
    export LD_LIBRARY_PATH="$1/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
else
    make -j16 CUDA_ARCH=sm_90a BUILD=build-dev 2>&1 | tail -20 | tee "$OUT/build.log" || exit 1
    BIN=build-dev/memra
fi
start=$(date +%s)
timeout ${GATE_TIMEOUT:-480} "$BIN" gate kernels ${GATE_ARGS:---bench --seed 1} --log "$OUT/gate-full.log" 2>&1 | tee "$OUT/gate.txt"
rc=$?
echo "gate exit $rc after $(( $(date +%s) - start )) s" | tee -a "$OUT/gate.txt"
# SANITIZE=1: a short gate under compute-sanitizer memcheck (out-of-bounds and
# misaligned accesses), kept small because memcheck slows kernels a lot.
if [ "${SANITIZE:-0}" = 1 ]; then
    timeout ${SAN_TIMEOUT:-150} compute-sanitizer --tool memcheck --print-limit 20 \
        "$BIN" gate kernels --quick --model 0.8b --seed 2 > "$OUT/sanitizer.txt" 2>&1
    src=$?
    grep -E "ERROR SUMMARY|gate kernels:|Invalid|out of bounds" "$OUT/sanitizer.txt" | head -20
    echo "sanitizer run exit $src"
    [ $src = 0 ] || rc=1
fi
exit $rc
