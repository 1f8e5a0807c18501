#!/bin/bash
# Session 31's second call: the new defaults (MoE decode gate/up on the int8 core; Q6_K at ks 8 tight where its
# grid exceeds a wave) gated, timed against their switches, and the four files' table rows as BUDGET allows.
#   BUDGET=300 OUT=$OUT bash bench/next_run_defaults.sh   (carry .bin .fix; .bin/memra this tree, stripped, xz'd)
set -u
T0=$(date +%s); BUDGET=${BUDGET:-300}
left() { [ $(( $(date +%s) - T0 )) -lt $(( BUDGET - $1 )) ]; }
bash bench/unpack.sh .bin .fix
B=.bin/memra
nvidia-smi --query-gpu=name --format=csv,noheader
for m in 35b-a3b 27b; do
  timeout 60 $B gate kernels --model $m --seed 311 >>$OUT/gk.log 2>&1
  echo "gate kernels $m rc=$? $(grep -h 'passed' $OUT/gk.log | tail -1)"
done
grep -h FAIL $OUT/gk.log | head
timeout 60 $B gate model --backend cuda --fixtures tests/data --fixtures .fix >$OUT/gm.log 2>&1
echo "gate model rc=$? $(tail -1 $OUT/gm.log)"
f=/tmp/m.gguf
ab() { # file, switch: decode@0 over two interleaved rounds
  for r in 1 2; do
    for v in - $2; do
      e=; [ $v != - ] && e=$v
      echo "$1 r$r [$v] $(env $e $B bench -m $f --backend cuda --prefill 16 --depth 0 --decode-tokens 64 \
        --reps 3 2>&1 | grep '^decode' | tr -s ' ')"
    done
  done
}
row() { # the table row; the full output (with the decode profile at depth 15) in $OUT/row-FILE.txt
  local o=$OUT/row-${1// /-}.txt
  $B bench -m $f --backend cuda --prefill 512 --depth 0 --decode-tokens 64 --reps 3 --profile >$o 2>&1
  echo "$1 table: $(grep -E '^(decode|prefill|copy)' $o | tr -s ' ' | tr '\n' '|')"; }
for spec in "35b-a3b q4_k_m MEMRA_MOE_Q8=0" "27b q4_k_m MEMRA_MMVQ_TIGHT_Q6K8=0" "9b q4_k_m -" "9b q8_0 -"; do
  set -- $spec
  left 40 || break
  $B mkmodel --preset $1 --type $2 --vocab tests/data/tiny-dense.bf16.gguf -o $f >/dev/null 2>&1 || echo mkmodel failed
  [ $3 != - ] && ab "$1 $2" $3
  row "$1 $2"
  rm -f $f
done
gzip -f $OUT/gk.log
echo "t=$(( $(date +%s) - T0 ))"
