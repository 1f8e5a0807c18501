#!/bin/bash
# memra_backend_cuda_moe_regimes_equal (moe.cu) replaces cmd_gate.c's own reading of MEMRA_MOE_Q8: gate kernels on
# 35b-a3b and 122b-a10b by default (no "T=1 vs each row" row for the Q4_K gate/up) and under MEMRA_MOE_Q8=0 (those
# rows present and passing), then the rest of the decode-step ablation (bench/next_run_ablate.sh).
#   BUDGET=540 OUT=$OUT bash bench/next_run_query.sh   (carry .bin .fix; .bin/memra this tree, stripped, xz'd)
set -u
T0=$(date +%s); BUDGET=${BUDGET:-540}
bash bench/unpack.sh .bin .fix
B=.bin/memra
for m in 35b-a3b 122b-a10b; do
  for q in default 0; do
    e=; [ $q = 0 ] && e=MEMRA_MOE_Q8=0
    env $e timeout 90 $B gate kernels --model $m --seed 353 >$OUT/gk-$m-$q.log 2>&1
    echo "$m MEMRA_MOE_Q8=$q: rc=$? $(grep -h 'passed' $OUT/gk-$m-$q.log | tail -1)" \
      "cross-regime rows (T=1 vs each row of a T >= 16 batch):" \
      "$(awk '$1 == "moe_block-inv" && $3 == "T=1" && $8 >= 16 {print $7 ":" $11}' $OUT/gk-$m-$q.log | sort | uniq -c | tr '\n' ' ')"
    grep -h FAIL $OUT/gk-$m-$q.log | head -5
  done
done
gzip -f $OUT/gk-*.log
BUDGET=$(( BUDGET - $(date +%s) + T0 )) bash bench/next_run_ablate.sh
