#!/bin/bash
# Session 36, run 1 (H100/H200). Built from HEAD + bench/results/logs/2026-12-07g-run2-nomath.patch
# (MEMRA_DIAG_NOMATH: k_mmvq_tm streams its ring, no arithmetic: WRONG RESULTS, timing only).
#  1. which SASS tools the machine has; if cuobjdump is there, the SASS of every k_mmvq_tm / k_mmvq_tm2
#     instance into $OUT/sass-tm.txt (the loop's instruction count per super-block: the issue-budget question).
#  0. chain_lab (bench/kernels/chain_lab.cu, built by BUILD=build-lab REBUILD=1 bash bench/kernels/lab.sh chain_lab,
#     stripped, .bin/chain_lab): the new streamer (one block an SM, a producer warp's bulk copies into a deep ring
#     across phases) against base / chain / chain-np, per shape; then ring size and consumer warps.
#  2. session 35's unrun test: the arithmetic-free step against the ring depth (MEMRA_TM_D=2|4), 9b and 27b.
#   BUDGET=200 OUT=$OUT bash bench/results/logs/2026-12-07h-run1.sh   (carry .bin)
set -u
T0=$(date +%s); BUDGET=${BUDGET:-200}
left() { [ $(( $(date +%s) - T0 )) -lt $(( BUDGET - $1 )) ]; }
bash bench/unpack.sh .bin
B=.bin/memra
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
export PATH=$PATH:/usr/local/cuda/bin
for sh in "4096 4096" "4096 12288" "12288 4096" "2048 16" "5120 17408"; do
  left 200 || break
  echo "== $sh"; timeout 60 .bin/chain_lab $sh; echo "rc=$?"
done
for v in "CHAIN_NC=12 4096 4096" "CHAIN_NC=4 4096 4096" "CHAIN_R=32 4096 12288" "CHAIN_R=90 4096 12288"; do
  left 180 || break
  echo "== $v"; env ${v% * *} timeout 60 .bin/chain_lab ${v#* }; echo "rc=$?"
done
for t in cuobjdump nvdisasm ncu nsys; do echo "$t: $(command -v $t || echo none)"; done
if command -v cuobjdump >/dev/null; then
  cuobjdump -sass $B 2>/dev/null | awk '/Function : /{p = ($0 ~ /k_mmvq_tm/)} p' > $OUT/sass-tm.txt
  grep -c "Function : " $OUT/sass-tm.txt
  awk '/Function : /{if (n) print n, f; f=$3; n=0} /^ +\/\*[0-9a-f]{4}\*\//{n++} END{print n, f}' $OUT/sass-tm.txt |
    sort -n | head -40
  xz -6 -f $OUT/sass-tm.txt
fi
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
