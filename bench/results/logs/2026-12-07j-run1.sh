#!/bin/bash
# Session 38, run 1 (~3 min on an H100): why chain_lab's decoupled streamer (k_chain_st) stops at 36-38% of copy
# whatever its consumer warps and ring size (2026-12-07h section 1). CHAIN_NP producer warps and CHAIN_CU
# super-blocks a bulk copy; if one lane issuing 2,304-byte copies is the cap, NP or CU lift stream-nobar; CHAIN_PK=1
# fills by the producer lanes' cp.async instead of bulk copies. Then
# session 37's unrun bench/next_run_floor.sh (stream_lab; mmvq_tm_lab SWEEP=1 on 9b's shapes).
#   Build here: BUILD=build-lab REBUILD=1 bash bench/kernels/lab.sh chain_lab; strip into .bin, xz (and
#               stream_lab, mmvq_tm_lab as next_run_floor.sh says)
#   Device:     OUT=$OUT bash bench/results/logs/2026-12-07j-run1.sh   (carry .bin)
set -u
T0=$(date +%s)
bash bench/unpack.sh .bin
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
run() { # shape, then env assignments
  local sh=$1; shift
  echo "== {$sh} $*"
  env "$@" timeout 60 .bin/chain_lab $sh 2>&1 | grep -v "^chain_lab:\|^stream:" | grep "stream\|base\|chain\|FAIL" | tr '\n' ' '
  echo
}
for sh in "4096 12288" "4096 4096" "12288 4096"; do
  for v in "CHAIN_NP=1 CHAIN_CU=1" "CHAIN_NP=4 CHAIN_CU=1" "CHAIN_NP=1 CHAIN_CU=4" "CHAIN_NP=4 CHAIN_CU=4" \
           "CHAIN_NP=2 CHAIN_CU=1 CHAIN_PK=1" "CHAIN_NP=4 CHAIN_CU=1 CHAIN_PK=1" "CHAIN_NP=4 CHAIN_CU=4 CHAIN_PK=1"; do
    run "$sh" $v
  done
  echo "t=$(( $(date +%s) - T0 ))"
done
run "4096 12288" CHAIN_NP=4 CHAIN_CU=4 CHAIN_NC=12
run "4096 12288" CHAIN_NP=4 CHAIN_CU=2 CHAIN_NC=12 CHAIN_R=48
run "4096 12288" CHAIN_NP=4 CHAIN_CU=4 CHAIN_NC=4
echo "t=$(( $(date +%s) - T0 ))"
OUT=$OUT bash bench/next_run_floor.sh 2>&1 | tail -60
echo "t=$(( $(date +%s) - T0 ))"
