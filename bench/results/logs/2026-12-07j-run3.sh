#!/bin/bash
# Session 38, run 3 (~1.5 min on an H100): chain_lab's streamer with a finer K split (CHAIN_KSP: items of fewer
# super-blocks, so a phase's chain after the barrier is shorter; other bits than production's, checked against the
# CPU reference and base-chain), the best producer form of run 2 (CHAIN_NP=4 CHAIN_CU=4 CHAIN_PK=1), 16 consumer
# warps and the flat barrier (CHAIN_NSUB=0). First: the error that stopped run 2's streamer on {12288, 4096}.
#   Build here: BUILD=build-lab REBUILD=1 bash bench/kernels/lab.sh chain_lab; strip into .bin, xz
#   Device:     OUT=$OUT bash bench/results/logs/2026-12-07j-run3.sh   (carry .bin)
set -u
T0=$(date +%s)
bash bench/unpack.sh .bin
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
echo "== {12288 4096} NC=16 NP=4 CU=1: stderr"
CHAIN_NP=4 CHAIN_CU=1 CHAIN_NC=16 timeout 30 .bin/chain_lab 12288 4096 2>&1 >/dev/null | tail -3
P=2 CHAIN_NP=4 CHAIN_CU=1 CHAIN_NC=16 timeout 90 /usr/local/cuda/bin/compute-sanitizer --print-limit 3 \
  .bin/chain_lab 12288 4096 2>&1 | grep -v "^base\|^chain" | head -30
echo "t=$(( $(date +%s) - T0 ))"
run() { # shape, then env assignments
  local sh=$1; shift
  echo "== {$sh} $*"
  env CHAIN_NP=4 CHAIN_PK=1 CHAIN_NC=16 CHAIN_NSUB=0 "$@" timeout 60 .bin/chain_lab $sh 2>&1 |
    grep -v "^chain_lab:\|^stream:" | grep "stream\|base\|FAIL\|error" | tr '\n' ' '
  echo
}
for k in 4 8 16; do run "4096 4096" CHAIN_CU=4 CHAIN_KSP=$k; done
for k in 4 8 16; do run "4096 12288" CHAIN_CU=4 CHAIN_KSP=$k; done
for k in 5 10 20; do run "5120 17408" CHAIN_CU=4 CHAIN_R=12 CHAIN_KSP=$k; done
for k in 8 16 24; do run "12288 4096" CHAIN_CU=4 CHAIN_KSP=$k; done
echo "t=$(( $(date +%s) - T0 ))"
