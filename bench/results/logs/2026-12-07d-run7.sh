#!/bin/bash
# The decode-step ablation (bench/ablate.py: the step without each op in turn) of the four files, for the map
# of where a captured step goes; 2026-12-07d section 5 has 35b-a3b and 9b q4_k_m at depth 0 (one op at a time,
# by hand). This adds 27b and 9b q8_0, every op of the profile, and attention's ops at depth 4096 (35b-a3b, 9b).
#   BUDGET=420 OUT=$OUT bash bench/next_run_ablate.sh   (carry .bin .fix; .bin/memra this tree, stripped, xz'd)
set -u
T0=$(date +%s); BUDGET=${BUDGET:-420}
left() { [ $(( $(date +%s) - T0 )) -lt $(( BUDGET - $1 )) ]; }
bash bench/unpack.sh .bin .fix
B=.bin/memra
nvidia-smi --query-gpu=name --format=csv,noheader
f=/tmp/m.gguf
for spec in "27b q4_k_m" "9b q8_0" "35b-a3b q4_k_m" "9b q4_k_m"; do
  set -- $spec
  left 100 || break
  $B mkmodel --preset $1 --type $2 --vocab tests/data/tiny-dense.bf16.gguf -o $f >/dev/null 2>&1 || echo mkmodel failed
  echo "== $1 $2"
  timeout $(( BUDGET - $(date +%s) + T0 - 10 )) python3 bench/ablate.py -m $f --memra $B --markdown 2>&1 |
    tee $OUT/ablate-$1-$2.txt
  if [ $1 != 27b ] && [ $2 = q4_k_m ] && left 60; then
    timeout $(( BUDGET - $(date +%s) + T0 - 10 )) python3 bench/ablate.py -m $f --memra $B --markdown --depth 4096 \
      --ops "attention,qk_norm_rope_store,gdn" 2>&1 | tee -a $OUT/ablate-$1-$2.txt
  fi
  rm -f $f
done
echo "t=$(( $(date +%s) - T0 ))"
