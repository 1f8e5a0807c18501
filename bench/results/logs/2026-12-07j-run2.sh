#!/bin/bash
# Session 38, run 2 (~1 min on an H100): chain_lab's streamer after run 1, with the consumers' and producers' slot
# arithmetic in 32-bit counters (session 36's form divided 64-bit integers by R twice a super-block), across
# consumer warps (CHAIN_NC 8, 12, 16), producer warps (CHAIN_NP) and super-blocks a bulk copy (CHAIN_CU); and the
# grid barrier's forms (CHAIN_NSUB 16, 1, and 0: one counter, release adds, acquire polls).
#   Build here: BUILD=build-lab REBUILD=1 bash bench/kernels/lab.sh chain_lab; strip into .bin, xz
#   Device:     OUT=$OUT bash bench/results/logs/2026-12-07j-run2.sh   (carry .bin)
set -u
T0=$(date +%s)
bash bench/unpack.sh .bin
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
run() { # shape, then env assignments
  local sh=$1; shift
  echo "== {$sh} $*"
  env "$@" timeout 60 .bin/chain_lab $sh 2>&1 | grep -v "^chain_lab:\|^stream:" | grep "stream\|base\|FAIL" | tr '\n' ' '
  echo
}
for sh in "4096 12288" "4096 4096" "12288 4096" "5120 17408"; do
  for v in "CHAIN_NP=1 CHAIN_CU=1 CHAIN_NC=8" "CHAIN_NP=4 CHAIN_CU=4 CHAIN_NC=8" "CHAIN_NP=4 CHAIN_CU=4 CHAIN_NC=12" \
           "CHAIN_NP=4 CHAIN_CU=4 CHAIN_NC=16" "CHAIN_NP=2 CHAIN_CU=2 CHAIN_NC=16" "CHAIN_NP=4 CHAIN_CU=1 CHAIN_NC=16" \
           "CHAIN_NP=4 CHAIN_CU=4 CHAIN_NC=16 CHAIN_PK=1"; do
    run "$sh" $v
  done
  echo "t=$(( $(date +%s) - T0 ))"
done
for sh in "4096 12288" "4096 4096"; do
  run "$sh" CHAIN_NP=4 CHAIN_CU=4 CHAIN_NC=16 CHAIN_NSUB=0   # the flat barrier
  run "$sh" CHAIN_NP=4 CHAIN_CU=4 CHAIN_NC=16 CHAIN_NSUB=1
done
for v in "CHAIN_NP=4 CHAIN_CU=3 CHAIN_NC=12" "CHAIN_NP=4 CHAIN_CU=3 CHAIN_NC=16" "CHAIN_NP=4 CHAIN_CU=6 CHAIN_NC=16"; do
  run "12288 4096" $v   # 6 super-blocks an item there: CU 4 does not divide it
done
echo "t=$(( $(date +%s) - T0 ))"
