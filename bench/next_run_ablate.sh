#!/bin/bash
# The rest of the decode-step ablation (bench/ablate.py: the step without each op in turn). 2026-12-07d has 27b,
# 9b q8_0 and 35b-a3b at depth 0 (section 8: run 7, an earlier form of this script, which ran out of device time
# before the rest). This adds attention's ops at depth 4096 on 35b-a3b and 9b q4_k_m, and 9b q4_k_m's table.
#   BUDGET=300 OUT=$OUT bash bench/next_run_ablate.sh   (carry .bin .fix; .bin/memra this tree, stripped, xz'd)
set -u
T0=$(date +%s); BUDGET=${BUDGET:-300}
left() { [ $(( $(date +%s) - T0 )) -lt $(( BUDGET - $1 )) ]; }
rest() { echo $(( BUDGET - $(date +%s) + T0 - 10 )); }
bash bench/unpack.sh .bin .fix
B=.bin/memra
nvidia-smi --query-gpu=name --format=csv,noheader
f=/tmp/m.gguf
for m in 35b-a3b 9b; do
  left 100 || break
  $B mkmodel --preset $m --type q4_k_m --vocab tests/data/tiny-dense.bf16.gguf -o $f >/dev/null 2>&1 || echo mkmodel failed
  echo "== $m q4_k_m"
  timeout $(rest) python3 bench/ablate.py -m $f --memra $B --markdown --depth 4096 \
    --ops "attention,qk_norm_rope_store,gdn" 2>&1 | tee $OUT/ablate-$m.txt
  [ $m = 9b ] && left 60 && timeout $(rest) python3 bench/ablate.py -m $f --memra $B --markdown 2>&1 |
    tee -a $OUT/ablate-$m.txt
  rm -f $f
done
echo "t=$(( $(date +%s) - T0 ))"
