#!/bin/bash
# MEMRA_DIAG_NOMATH=1 (a timing diagnostic, WRONG RESULTS): k_mmvq_tm streams its weights through its ring and
# does no arithmetic (not k_mmvq_tm2, 27b's Q4_K ffn_down). Decode@0 in two interleaved rounds against the
# default, and with MEMRA_DIAG_NOPREP=2 too (no prep launched either): what the int8 matvecs' arithmetic, and
# with it the preps, cost the step at most.
#   BUDGET=240 OUT=$OUT bash bench/next_run_nomath.sh   (carry .bin .fix; .bin/memra this tree, stripped, xz'd)
set -u
T0=$(date +%s); BUDGET=${BUDGET:-240}
left() { [ $(( $(date +%s) - T0 )) -lt $(( BUDGET - $1 )) ]; }
bash bench/unpack.sh .bin
B=.bin/memra
nvidia-smi --query-gpu=name --format=csv,noheader
f=/tmp/m.gguf
dec() { env "$@" $B bench -m $f --backend cuda --prefill 16 --depth 0 --decode-tokens 64 --reps 3 2>&1 |
  grep '^decode' | tr -s ' '; }
for m in 9b 35b-a3b 27b; do
  left 50 || break
  $B mkmodel --preset $m --type q4_k_m --vocab tests/data/tiny-dense.bf16.gguf -o $f >/dev/null 2>&1 || echo mkmodel failed
  for r in 1 2; do
    left 25 || break
    echo "$m d0 r$r [default] $(dec MEMRA_NONE=0)"
    echo "$m d0 r$r [NOMATH=1] $(dec MEMRA_DIAG_NOMATH=1)"
    echo "$m d0 r$r [NOMATH=1 NOPREP=2] $(dec MEMRA_DIAG_NOMATH=1 MEMRA_DIAG_NOPREP=2)"
  done
  rm -f $f
done
echo "t=$(( $(date +%s) - T0 ))"
