#!/bin/bash
# Session 36, run 4: the tree with mmvq_sb_lean the default (.bin/memra: make -j2 BUILD=build-dev CUDA_ARCH=sm_90a
# DEPS=.deps, stripped, xz'd): gate kernels on the two shapes run 3 did not gate (9b, 27b passed there), gate
# model on every fixture, then the four files through bench/run_gpu.sh with the bench defaults.
# Also sb_lab (BUILD=build-lab REBUILD=1 bash bench/kernels/lab.sh sb_lab at 0a02d98, stripped into .bin/sb_lab).
#   OUT=$OUT bash bench/results/logs/2026-12-07h-run4.sh   (carry .bin .fix)
set -u
T0=$(date +%s)
bash bench/unpack.sh .bin .fix
B=.bin/memra
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
for m in 35b-a3b 0.8b; do
  timeout 60 $B gate kernels --model $m --seed 368 >$OUT/gk-$m.log 2>&1
  echo "gate kernels $m rc=$? $(grep -h 'passed' $OUT/gk-$m.log | tail -1)"; grep -h "FAIL" $OUT/gk-$m.log | head -5
done
timeout 90 $B gate model --backend cuda --fixtures tests/data --fixtures .fix >$OUT/gm.log 2>&1
echo "gate model rc=$? $(tail -1 $OUT/gm.log)"
cat $OUT/gk-*.log | gzip >$OUT/gk.log.gz; rm -f $OUT/gk-*.log
timeout 40 .bin/sb_lab; echo "sb_lab rc=$?"   # 0a02d98's lab: V4 (mmvq_sb_lean, planes global) is new
SKIP_BUILD=1 SKIP_GATE=1 BUILD=.bin TIME_BUDGET=330 VOCAB=tests/data/tiny-dense.bf16.gguf OUT=$OUT/rg \
  MODELS="9b:q4_k_m 27b:q4_k_m 35b-a3b:q4_k_m 9b:q8_0" \
  BENCH_ARGS="--prefill 512,8192 --depth 0,4096 --decode-tokens 64 --reps 3" bash bench/run_gpu.sh 2>&1 | tail -14
echo "t=$(( $(date +%s) - T0 ))"
