#!/bin/bash
# Written in session 20, run in session 21 (run 1 of bench/results/2026-12-06b-h100.md, whose script strips
# the decompression lines below and calls this): the tree of 2026-12-06 (split argmax and the side branch on by
# default): `memra gate kernels` on the 27b and 0.8b shapes (run 1 of bench/results/2026-12-06-h100.md did 9b and
# 35b-a3b), then the four files through bench/run_gpu.sh. One call, ~1 min on the H100.
# Binary: .bin/memra.xz (make -j2 BUILD=build-dev CUDA_ARCH=sm_90a DEPS=.deps, stripped).
set -u
T0=$(date +%s)
python3 -c "
import lzma,glob,os
for z in glob.glob('.bin/*.xz'):
    open(z[:-3],'wb').write(lzma.open(z).read()); os.remove(z)
"; chmod +x .bin/memra
B=.bin/memra
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
for gm in 27b 0.8b; do
  timeout 40 $B gate kernels --model $gm --seed 161 >>$OUT/gk.log 2>&1
  echo "gate kernels $gm rc=$? t=$(( $(date +%s) - T0 ))"
done
grep -E "passed|FAIL" $OUT/gk.log
SKIP_BUILD=1 SKIP_GATE=1 BUILD=.bin TIME_BUDGET=250 VOCAB=tests/data/tiny-dense.bf16.gguf \
  MODELS="9b:q4_k_m 35b-a3b:q4_k_m 9b:q8_0 27b:q4_k_m" \
  BENCH_ARGS="--prefill 512,8192 --depth 0,4096 --decode-tokens 32 --reps 2" bash bench/run_gpu.sh 2>&1 | tail -12
echo "t=$(( $(date +%s) - T0 ))"
rm -f /tmp/memra-bench-*.gguf
echo "t=$(( $(date +%s) - T0 ))"
