#!/bin/bash
# Session 40, run 2: written after run 1, NOT RUN (the session's device time went to calls that got no machine).
# Run 1 (2026-12-07k-run1.sh) lost its timeline tables and CSVs: the device tool returns a limited number of
# files, so this run packs everything into one tarball.
#  1. 35b-a3b decode@0 ran ~5% slower at 7710fda than at 6cb2d2f in run 1 (2.21-2.24 against 2.10 ms); 177f949
#     reverted the one change of the plain build's step between them (524f7e1, no sync after the decode graph).
#     This checks the revert: base against HEAD, three rounds, interleaved.
#  2. The timeline tables (bench's per-kernel table, timeline.py's median step) for 35b-a3b and 9b q4_k_m, and
#     9b's with MEMRA_PDL=0: what PDL takes off each boundary.
#   .bin/memra:      make -j2 BUILD=build-dev CUDA_ARCH=sm_90a DEPS=.deps                      (stripped, xz'd)
#   .bin/memra-tl:   make -j2 BUILD=build-tl TIMELINE=1 CUDA_ARCH=sm_90a DEPS=.deps            (stripped, xz'd)
#   .bin/memra-base: the same as .bin/memra at 6cb2d2f                                          (stripped, xz'd)
#   Device:          OUT=$OUT bash bench/results/logs/2026-12-07l-run2.sh   (carry .bin; ~2 min on an H100)
set -u
T0=$(date +%s)
bash bench/unpack.sh .bin && ln -sf memra .bin/memra-head
mkdir -p /tmp/o
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
V=tests/data/tiny-dense.bf16.gguf
for spec in 35b-a3b:q4_k_m 9b:q4_k_m; do
  p=${spec%:*} ty=${spec#*:} f=/tmp/m.gguf
  rm -f $f
  timeout 120 .bin/memra mkmodel --preset $p --type $ty -o $f --vocab $V >/tmp/o/mk-$p-$ty.log 2>&1 ||
    { echo "$spec mkmodel failed"; tail -3 /tmp/o/mk-$p-$ty.log; continue; }
  A="-m $f --prefill 16 --reps 1 --depth 0 --decode-tokens 64"
  R="1 2 3"; [ $p = 9b ] && R=""  # 9b: run 1 showed no difference; timeline only
  for r in $R; do
    for v in base head; do
      timeout 90 .bin/memra-$v bench $A >/tmp/o/$v-$p-$ty-$r.txt 2>&1
      echo "$spec $v r$r: $(grep 'decode  depth' /tmp/o/$v-$p-$ty-$r.txt | cut -c1-100 || tail -1 /tmp/o/$v-$p-$ty-$r.txt)"
    done
  done
  for pdl in 1 0; do
    [ $pdl = 0 ] && [ $p != 9b ] && continue
    tl=/tmp/o/tl-$p-$ty-pdl$pdl
    timeout 90 env MEMRA_PDL=$pdl .bin/memra-tl bench $A --timeline $tl >$tl.txt 2>&1
    python3 bench/timeline.py $tl-d0.csv --first 0 >$tl-steps.txt 2>&1
    echo "$spec tl MEMRA_PDL=$pdl: $(grep 'decode  depth' $tl.txt | cut -c1-100)"
    echo "  $(tail -1 $tl-steps.txt)"
  done
  echo "t=$(( $(date +%s) - T0 ))"
done
gzip -f /tmp/o/*.csv
tar -czf $OUT/run2.tgz -C /tmp o
