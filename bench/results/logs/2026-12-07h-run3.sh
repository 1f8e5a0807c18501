#!/bin/bash
# Session 36, run 3: the lean int8 arithmetic (mmvq.cuh mmvq_sb_lean, built with -DMEMRA_MMVQ_LEAN=1) against the
# default, and sb_lab (the mechanism: a super-block's latency and throughput with the weights in shared memory).
#   .bin/memra:      make -j2 BUILD=build-dev CUDA_ARCH=sm_90a DEPS=.deps   (the default kernels)
#   .bin/memra-lean: make -j2 BUILD=build-lean CUDA_ARCH=sm_90a DEPS=.deps NVCC="/usr/local/cuda/bin/nvcc -DMEMRA_MMVQ_LEAN=1"
#   .bin/sb_lab:     BUILD=build-lab REBUILD=1 bash bench/kernels/lab.sh sb_lab
# Gates of the lean binary (gate kernels 9b, 27b; gate model on tests/data), then decode@0 A/B in interleaved
# rounds on 9b, 27b and 35b-a3b q4_k_m.
#   BUDGET=400 OUT=$OUT bash bench/results/logs/2026-12-07h-run3.sh   (carry .bin)
set -u
T0=$(date +%s); BUDGET=${BUDGET:-400}
left() { [ $(( $(date +%s) - T0 )) -lt $(( BUDGET - $1 )) ]; }
bash bench/unpack.sh .bin
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
timeout 60 .bin/sb_lab; echo "sb_lab rc=$?"
f=/tmp/m.gguf
dec() { $1 bench -m $f --backend cuda --prefill 16 --depth 0 --decode-tokens 64 --reps 3 2>&1 | grep '^decode' | tr -s ' '; }
gk() { timeout 90 .bin/memra-lean gate kernels --model $1 --seed 367 >$OUT/gk-$1.log 2>&1
  echo "lean gate kernels $1 rc=$? $(grep -h 'passed' $OUT/gk-$1.log | tail -1)"; grep -h "FAIL" $OUT/gk-$1.log | head -8; }
ab() { .bin/memra mkmodel --preset $1 --type q4_k_m --vocab tests/data/tiny-dense.bf16.gguf -o $f >/dev/null 2>&1 ||
    echo mkmodel failed
  for r in 1 2; do
    left 25 || break
    echo "$1 d0 r$r [default] $(dec .bin/memra)"
    echo "$1 d0 r$r [lean] $(dec .bin/memra-lean)"
  done
  rm -f $f; }
gk 9b
left 80 && ab 9b
left 120 && ab 27b
left 60 && { timeout 60 .bin/memra-lean gate model --backend cuda --fixtures tests/data >$OUT/gm.log 2>&1
  echo "lean gate model rc=$? $(tail -1 $OUT/gm.log)"; }
left 100 && ab 35b-a3b
left 40 && gk 27b
cat $OUT/gk-*.log 2>/dev/null | gzip >$OUT/gk.log.gz; rm -f $OUT/gk-*.log
echo "t=$(( $(date +%s) - T0 ))"
