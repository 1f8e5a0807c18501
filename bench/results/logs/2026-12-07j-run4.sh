#!/bin/bash
# Session 38, run 4 (~30 s on an H100): are run 3's streamer rows stable? The same binary as run 3; each row twice,
# in two orders, and the two-level barrier (CHAIN_NSUB=16) beside the flat one (0).
#   Device:     OUT=$OUT bash bench/results/logs/2026-12-07j-run4.sh   (carry .bin: run 3's chain_lab)
set -u
T0=$(date +%s)
bash bench/unpack.sh .bin
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
run() { # shape, then env assignments
  local sh=$1; shift
  echo "== {$sh} $*"
  env CHAIN_NP=4 CHAIN_PK=1 CHAIN_NC=16 CHAIN_CU=4 "$@" timeout 60 .bin/chain_lab $sh 2>&1 |
    grep -v "^chain_lab:\|^stream:" | grep "stream\|base\|FAIL\|error" | tr '\n' ' '
  echo
}
for rep in 1 2; do
  for ns in 0 16; do
    run "4096 4096" CHAIN_NSUB=$ns
    run "4096 12288" CHAIN_NSUB=$ns CHAIN_KSP=8
    run "12288 4096" CHAIN_NSUB=$ns CHAIN_KSP=24
  done
  echo "t=$(( $(date +%s) - T0 ))"
done
