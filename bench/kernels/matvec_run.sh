#!/bin/bash
# One device call for the decode matvec work: the lab (bench/kernels/
# matvec_lab.cu) on three shapes, then `memra gate kernels --bench`, then a
# short table. Binaries are built beforehand (no GPU needed to build):
#   BUILD=build-matvec bash bench/kernels/matvec_lab.sh        -> DIR/matvec_lab
#   make BUILD=... CUDA_ARCH=sm_90a DEPS=.deps                  -> DIR/memra
#   bash bench/kernels/matvec_run.sh DIR        (DIR holds matvec_lab and memra)
# Logs go to $OUT (the device tool's output folder) or /tmp/matvec-out.
OUT=${OUT:-/tmp/matvec-out}
mkdir -p "$OUT"
B=${1:-build-matvec-run}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader 2>&1 | tee "$OUT/gpu.txt"
rc=0
for shape in "5120 17408" "17408 5120" "5120 2048"; do
    timeout 120 "$B/matvec_lab" $shape > "$OUT/lab-${shape// /x}.txt" 2>&1 || rc=1
    tail -1 "$OUT/lab-${shape// /x}.txt"
done
start=$(date +%s)
timeout 200 "$B/memra" gate kernels --bench --seed 3 --log "$OUT/gate-full.log" > "$OUT/gate.txt" 2>&1 || rc=1
echo "gate exit $? after $(( $(date +%s) - start )) s"
grep -E "FAIL|gate kernels:" "$OUT/gate.txt" | tail -5
echo "--- gate bench (production), T = 1 and 8"
awk '/^bench:/{p=1} p && ($3 == 1 || $3 == 8 || /copy/)' "$OUT/gate.txt" | head -40
echo "--- lab: % of copy, T = 1 / T = 8 (first shape column per variant)"
for f in "$OUT"/lab-*.txt; do
    echo "$(basename "$f" .txt): $(head -1 "$f" | sed 's/.*copy/copy/')"
    awk '/^LAB/{k=$2; if(!(k in seen)){seen[k]=1; order[++n]=k}; row[k]=row[k] sprintf(" %s:%s/%s%s", $3, $11, $17, ($NF=="ok")?"":"!"); cfg[$3]=$4" "$5} END{for(i=1;i<=n;i++) print order[i] row[order[i]]}' "$f"
done
exit $rc
