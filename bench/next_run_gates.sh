#!/bin/bash
# The gates over every model shape at the tree's head: gate model, then gate kernels on 122b-a10b, 35b-a3b, 27b,
# 9b and 0.8b, stopping when BUDGET runs short. Run 1 of bench/results/2026-12-07f-h100.md (~80 s, H100).
#   BUDGET=300 OUT=$OUT bash bench/next_run_gates.sh   (carry .bin .fix; .bin/memra this tree, stripped, xz'd)
set -u
T0=$(date +%s); BUDGET=${BUDGET:-300}
bash bench/unpack.sh .bin .fix
B=.bin/memra
nvidia-smi --query-gpu=name --format=csv,noheader
timeout 60 $B gate model --backend cuda --fixtures tests/data --fixtures .fix >$OUT/gm.log 2>&1
echo "gate model rc=$? $(tail -1 $OUT/gm.log)"
for m in 122b-a10b 35b-a3b 27b 9b 0.8b; do
  [ $(( $(date +%s) - T0 )) -lt $(( BUDGET - 70 )) ] || break
  timeout 90 $B gate kernels --model $m --seed 361 >$OUT/gk-$m.log 2>&1
  echo "gate kernels $m rc=$? $(grep -h 'passed' $OUT/gk-$m.log | tail -1)"
  grep -h FAIL $OUT/gk-$m.log | head -5
  grep -h '^attention' $OUT/gk-$m.log | head -4
done
gzip -f $OUT/gk-*.log
echo "t=$(( $(date +%s) - T0 ))"
