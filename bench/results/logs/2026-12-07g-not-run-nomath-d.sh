#!/bin/bash
# MEMRA_DIAG_NOMATH=1 (WRONG RESULTS, timing only; k_mmvq_tm streams its ring and does no arithmetic) against
# the ring's depth (MEMRA_TM_D=2 or 4 for every TL = 1 launch; the default takes 4 where a warp has 8 or more
# super-blocks, else 2): whether more bytes in flight would lift the arithmetic-free step. Two rounds, 9b and 27b.
# Not run (session 35's device time ran out). Build with the diagnostic first:
#   git apply bench/results/logs/2026-12-07g-run2-nomath.patch && make -j2 BUILD=build-dev CUDA_ARCH=sm_90a DEPS=.deps
#   BUDGET=150 OUT=$OUT bash bench/results/logs/2026-12-07g-not-run-nomath-d.sh   (carry .bin: that build, stripped, xz'd)
set -u
T0=$(date +%s); BUDGET=${BUDGET:-150}
left() { [ $(( $(date +%s) - T0 )) -lt $(( BUDGET - $1 )) ]; }
bash bench/unpack.sh .bin
B=.bin/memra
nvidia-smi --query-gpu=name --format=csv,noheader
f=/tmp/m.gguf
dec() { env "$@" $B bench -m $f --backend cuda --prefill 16 --depth 0 --decode-tokens 64 --reps 3 2>&1 |
  grep '^decode' | tr -s ' '; }
for m in 9b 27b; do
  left 40 || break
  $B mkmodel --preset $m --type q4_k_m --vocab tests/data/tiny-dense.bf16.gguf -o $f >/dev/null 2>&1 || echo mkmodel failed
  for r in 1 2; do
    left 20 || break
    echo "$m d0 r$r [default] $(dec MEMRA_NONE=0)"
    echo "$m d0 r$r [TM_D=4] $(dec MEMRA_TM_D=4)"
    echo "$m d0 r$r [NOMATH=1] $(dec MEMRA_DIAG_NOMATH=1)"
    echo "$m d0 r$r [NOMATH=1 TM_D=2] $(dec MEMRA_DIAG_NOMATH=1 MEMRA_TM_D=2)"
    echo "$m d0 r$r [NOMATH=1 TM_D=4] $(dec MEMRA_DIAG_NOMATH=1 MEMRA_TM_D=4)"
  done
  rm -f $f
done
echo "t=$(( $(date +%s) - T0 ))"
