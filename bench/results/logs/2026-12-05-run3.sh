#!/bin/bash
# session 19 run 3 (H100 or H200, whichever the call got): per-kernel times of one decode step under ncu,
# then the four files' bench with the landed tile-major Q4_K / k_mmv6b / Q6_K GEMM (run_gpu.sh, gates skipped:
# runs 1-2 passed them on this binary). Binary: .bin/memra.xz (make -j2 BUILD=build-dev CUDA_ARCH=sm_90a
# DEPS=.deps on the dev machine, stripped).
set -u
T0=$(date +%s)
python3 -c "
import lzma,glob,os
for z in glob.glob('.bin/*.xz'):
    open(z[:-3],'wb').write(lzma.open(z).read()); os.remove(z)
"; chmod +x .bin/memra
B=.bin/memra
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
f=/tmp/ncu-9b.gguf
$B mkmodel --preset 9b --type q4_k_m --vocab tests/data/tiny-dense.bf16.gguf -o $f >/dev/null 2>&1
# one prefill chunk of 16, two decode tokens: every kernel's duration and DRAM bytes (kernels serialized)
timeout 170 ncu --clock-control none --csv --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum \
    $B bench -m $f --backend cuda --prefill 16 --depth 0 --decode-tokens 2 --reps 1 >$OUT/ncu-9b.csv 2>$OUT/ncu-9b.err
echo "ncu rc=$? t=$(( $(date +%s) - T0 ))"
rm -f $f
SKIP_BUILD=1 SKIP_GATE=1 BUILD=.bin TIME_BUDGET=$(( 560 - ($(date +%s) - T0) )) VOCAB=tests/data/tiny-dense.bf16.gguf \
  MODELS="9b:q4_k_m 35b-a3b:q4_k_m 27b:q4_k_m 9b:q8_0" \
  BENCH_ARGS="--prefill 512,8192 --depth 0,4096 --decode-tokens 32 --reps 2" bash bench/run_gpu.sh
echo "t=$(( $(date +%s) - T0 ))"
