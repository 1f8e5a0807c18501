#!/bin/bash
# One device call for the tensor-core decode matvec (src/backend/cuda/mmv.cuh):
# the lab (bench/kernels/mmv_lab.cu) on the 9b / 27b FFN shapes, `memra gate
# kernels`, the 9b q4_k_m decode rate (32 tokens, 2 reps) and, if time is
# left, its decode profile. Binaries built beforehand (no
# GPU needed): BUILD=DIR bash bench/kernels/mmv_lab.sh; make BUILD=... CUDA_ARCH=sm_90a.
#   [ALT=NAME] bash bench/kernels/mmv_run.sh DIR [gate args...]
# (DIR holds mmv_lab and memra, and NAME: a second memra to bench and gate)
# Logs go to $OUT (the device tool's output folder) or /tmp/mmv-out. Every step
# is cut so that the whole script ends within BUDGET seconds (default 140).
OUT=${OUT:-/tmp/mmv-out}
mkdir -p "$OUT"
B=${1:-.bin}
shift
T0=$(date +%s)
left() { echo $(( ${BUDGET:-140} - ($(date +%s) - T0) - $1 )); } # seconds left, keeping $1 in reserve
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader 2>&1 | tee "$OUT/gpu.txt"
rc=0
for shape in "4096 12288" "12288 4096" "5120 17408" "17408 5120"; do
    timeout 15 "$B/mmv_lab" $shape > "$OUT/lab-${shape// /x}.txt" 2>&1 || rc=1
done
timeout $(left 35) "$B/memra" gate kernels "$@" --log "$OUT/gate-full.log" > "$OUT/gate.txt" 2>&1 || rc=1
echo "gate done at $(( $(date +%s) - T0 )) s"
timeout $(left 30) "$B/memra" mkmodel --preset 9b --type q4_k_m -o /tmp/m.gguf \
    --vocab tests/data/tiny-dense.bf16.gguf > "$OUT/mkmodel.txt" 2>&1 || rc=1
timeout $(left 14) "$B/memra" bench -m /tmp/m.gguf --prefill 512 --depth 0 --decode-tokens 32 --reps 2 \
    > "$OUT/bench.txt" 2>&1 || rc=1
if [ -n "$ALT" ]; then # a second memra binary (another production ST): its decode rate and gate
    timeout $(left 40) "$B/$ALT" bench -m /tmp/m.gguf --prefill 512 --depth 0 --decode-tokens 32 --reps 2 \
        > "$OUT/bench-$ALT.txt" 2>&1 || rc=1
    timeout $(left 12) "$B/$ALT" gate kernels "$@" --log "$OUT/gate-$ALT-full.log" > "$OUT/gate-$ALT.txt" 2>&1 || rc=1
fi
[ "$(left 2)" -gt 8 ] && timeout $(left 2) "$B/memra" bench -m /tmp/m.gguf --prefill 512 --depth 0 \
    --decode-tokens 16 --reps 1 --profile > "$OUT/bench-profile.txt" 2>&1
rm -f /tmp/m.gguf
echo "end at $(( $(date +%s) - T0 )) s"
echo "--- gate"
for f in "$OUT"/gate*.txt; do echo "$f"; grep -E "FAIL|gate kernels:|matmul" "$f" | tail -8; done
for f in "$OUT"/bench*.txt; do
    echo "--- $f"
    grep -iE "decode|tok/s|ffn|qkv|ssm_in|ssm_out|mmv|matmul" "$f" | head -20
done
echo "--- lab"
for f in "$OUT"/lab-*.txt; do head -1 "$f"; grep -E "^MMV|failed|rror" "$f"; done
exit $rc
