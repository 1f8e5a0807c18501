#!/bin/bash
# The four files of issue 4: memra bench with the defaults (prefill 512 and 8192, decode at depth 0 and
# 4096), CSV lines kept, the table printed last. ENVV: environment assignments for every bench (e.g.
# ENVV="MEMRA_CARVEOUT=100"), empty for the defaults.
#   BUDGET=560 OUT=$OUT bash bench/next_run_table.sh   (carry .bin .fix; .bin/memra this tree, stripped, xz'd)
set -u
T0=$(date +%s); BUDGET=${BUDGET:-560}; ENVV=${ENVV:-}
left() { [ $(( $(date +%s) - T0 )) -lt $(( BUDGET - $1 )) ]; }
bash bench/unpack.sh .bin .fix
B=.bin/memra
nvidia-smi --query-gpu=name --format=csv,noheader
echo "ENVV=[$ENVV]"
f=/tmp/m.gguf
for spec in "9b q8_0" "9b q4_k_m" "27b q4_k_m" "35b-a3b q4_k_m"; do
  set -- $spec
  left 100 || break
  $B mkmodel --preset $1 --type $2 --vocab tests/data/tiny-dense.bf16.gguf -o $f >/dev/null 2>&1 || echo mkmodel failed
  o=$OUT/bench-$1-$2.txt
  env $ENVV $B bench -m $f --backend cuda --prefill 512,8192 --depth 0,4096 --decode-tokens 64 --reps 3 --csv \
    >$o.csv 2>$o
  echo "== $1 $2 rc=$?"; grep -E '^(copy|prefill|decode)' $o
  rm -f $f
done
echo "t=$(( $(date +%s) - T0 ))"
