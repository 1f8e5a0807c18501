#!/bin/bash
# Session 41, run 1: session 40's unrun run 2 (2026-12-07l-run2.sh: the revert 177f949 against 6cb2d2f, and the
# timeline tables of 35b-a3b and 9b q4_k_m, which run 1 of 2026-12-07l lost), plus an A/B of mmvq.cuh's
# unpredicated B loads (32-bit plane offsets; the unused MMA columns load token 0's planes instead of zeros; the ring
# slot index unsigned) and its Q6_K codes made signed by one byte-wise subtraction (tools/sass.py: the Q4_K step
# 253 -> 223 instructions past the ring wait, 114 -> 91 registers; the Q6_K step 710 -> 677). It must keep every
# bit: logits of 24 decode steps (eval --chunk 1 --all) cmp-equal to base's.
#   .bin/memra:      2368d1f with logs/2026-12-08-run1-mmvq.patch applied,
#                    make -j2 BUILD=build-dev CUDA_ARCH=sm_90a DEPS=.deps                      (stripped, xz'd)
#   .bin/memra-base: 376ab31 (eval --chunk; the kernels of 7ee39b7), the same make              (stripped, xz'd)
#   .bin/memra-tl:   7ee39b7 with TIMELINE=1 (BUILD=build-tl)
#   .bin/memra-6cb:  6cb2d2f, the binary of the numbers of record (2026-12-07h-h100.md run 4)
#   Device:          BUDGET=S OUT=$OUT bash bench/results/logs/2026-12-08-run1.sh   (carry .bin; ~5 min on an H100)
#                    (BUDGET: the seconds the call may take; 35b-a3b, 27b and the gate are skipped when they
#                    would not fit)
set -u
T0=$(date +%s); BUDGET=${BUDGET:-500}
left() { [ $(( $(date +%s) - T0 )) -lt $(( BUDGET - $1 )) ]; }
bash bench/unpack.sh .bin
O=/tmp/o; mkdir -p $O
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader | tee $O/gpu.txt
V=tests/data/tiny-dense.bf16.gguf
TOK=$(python3 -c "import random; random.seed(11)
print(','.join(str(random.randrange(1000, 150000)) for _ in range(24)))")
pack() { tar -czf $OUT/run1.tgz -C /tmp o; } # after each file: a run cut short keeps what it made
dec() { # binary, file, label: one decode@0 line
  timeout 90 .bin/$1 bench -m $2 --prefill 16 --reps 1 --depth 0 --decode-tokens 64 >$O/$3.txt 2>&1
  echo "$3: $(grep 'decode  depth' $O/$3.txt | cut -c1-100 || tail -1 $O/$3.txt)"
}
for spec in 9b:q4_k_m 35b-a3b:q4_k_m 27b:q4_k_m; do
  p=${spec%:*} ty=${spec#*:} f=/tmp/m.gguf
  [ $p != 9b ] && ! left 150 && { echo "$spec skipped: t=$(( $(date +%s) - T0 ))"; continue; }
  rm -f $f
  timeout 150 .bin/memra mkmodel --preset $p --type $ty -o $f --vocab $V >$O/mk-$p-$ty.log 2>&1 ||
    { echo "$spec mkmodel failed"; tail -3 $O/mk-$p-$ty.log; continue; }
  # bits: 24 decode steps' logits, base against the change
  for b in memra-base memra; do
    timeout 120 .bin/$b eval -m $f --backend cuda --ctx 64 --chunk 1 --all --tokens $TOK -o /tmp/ev-$b.f32 \
      >$O/ev-$b-$p.log 2>&1 || { echo "$spec $b eval failed"; tail -2 $O/ev-$b-$p.log; }
  done
  cmp /tmp/ev-memra-base.f32 /tmp/ev-memra.f32 &&
    echo "$spec: 24 decode steps' logits cmp-equal ($(stat -c %s /tmp/ev-memra.f32) bytes)"
  rm -f /tmp/ev-*.f32
  # speed: interleaved rounds
  R="1 2 3"; [ $p = 27b ] && R="1 2"
  for r in $R; do
    [ $p = 35b-a3b ] && dec memra-6cb $f 6cb-$p-$r
    dec memra-base $f base-$p-$r
    dec memra $f new-$p-$r
  done
  # the timeline tables (session 40's run 2): 35b-a3b and 9b, 9b also without PDL
  for pdl in 1 0; do
    [ $p = 27b ] && break
    [ $pdl = 0 ] && [ $p != 9b ] && continue
    tl=$O/tl-$p-$ty-pdl$pdl
    timeout 90 env MEMRA_PDL=$pdl .bin/memra-tl bench -m $f --prefill 16 --reps 1 --depth 0 --decode-tokens 64 \
      --timeline $tl >$tl.txt 2>&1
    python3 bench/timeline.py $tl-d0.csv --first 0 >$tl-steps.txt 2>&1
    echo "$spec tl MEMRA_PDL=$pdl: $(grep 'decode  depth' $tl.txt | cut -c1-100)"
    echo "  $(tail -1 $tl-steps.txt)"
  done
  echo "t=$(( $(date +%s) - T0 ))"
  pack
done
rm -f /tmp/m.gguf
# gate kernels on the change (T = 1..15 through the same loads), 9b shapes
if left 60; then
  timeout $(( BUDGET - 30 - $(date +%s) + T0 )) .bin/memra gate kernels --model 9b --seed 408 >$O/gk-9b.log 2>&1
  echo "gate kernels 9b rc=$?: $(grep -h 'passed' $O/gk-9b.log | tail -1)"; grep -h FAIL $O/gk-9b.log | head -5
fi
pack
echo "t=$(( $(date +%s) - T0 ))"
