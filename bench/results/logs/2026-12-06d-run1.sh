#!/bin/bash
# 2026-12-06d run 1 (tree 35066a6 + gemm_lab's LAB_DUMP/LAB_CMP): bench/next_wide_run.sh (MEMRA_MMVQ_WIDE=1:
# gates, 35b-a3b logits, decode A/B), then the baseline gemm_lab on the prefill GEMM shapes.
OUT=${OUT:-/tmp/run1}
bash bench/results/logs/2026-12-06d-run1-wide.sh  # (was bench/next_wide_run.sh)
chmod +x .bin/gemm_lab_base
for s in "5120 17408 q4_k" "17408 5120 q4_k 4" "17408 5120 q6_k 4" "5120 10240 q6_k 2" "4096 12288 q8_0" "12288 4096 q8_0" \
         "4096 12288 q4_k"; do
  set -- $s
  LAB_KS=${4:-1} .bin/gemm_lab_base 512 $1 $2 $3 2>&1 | grep -E "gemm_lab:|k_gemm_wg|FAIL" >> $OUT/lab.txt
done
cat $OUT/lab.txt | grep -E "gemm_lab:|TFLOP|FAIL|DIFF"
