#!/bin/bash
# Session 39, run 1 (written, not run in session 39: no device machine was lent). Three questions on the decode
# step of the four files, decode@0 of 64 tokens each:
#  1. the kernel timeline (make TIMELINE=1, `memra bench --timeline`): what each launch works after its wait, and
#     what the boundaries between launches cost, inside the captured step;
#  2. the host's share between steps: base (6cb2d2f, the numbers of record) against this tree, whose memra_forward
#     no longer syncs after the graph launch when no host copy is asked for, and against this tree with
#     MEMRA_UPLOAD_PINNED=1 (the batch's arrays copied from pinned memory);
#  3. the plain build's gate model (the plain build's pdl_start is the same instruction as before).
#   .bin/memra:      make -j2 BUILD=build-dev CUDA_ARCH=sm_90a DEPS=.deps                      (stripped, xz'd)
#   .bin/memra-tl:   make -j2 BUILD=build-tl TIMELINE=1 CUDA_ARCH=sm_90a DEPS=.deps            (stripped, xz'd)
#   .bin/memra-base: the same as .bin/memra at 6cb2d2f (git worktree add /tmp/base 6cb2d2f)     (stripped, xz'd)
#   Device:          OUT=$OUT bash bench/results/logs/2026-12-07k-run1.sh   (carry .bin; ~6 min on an H100)
set -u
T0=$(date +%s)
bash bench/unpack.sh .bin
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
timeout 90 .bin/memra gate model --backend cuda --fixtures tests/data >$OUT/gm.log 2>&1
echo "gate model rc=$? $(tail -1 $OUT/gm.log)"
timeout 90 env MEMRA_UPLOAD_PINNED=1 .bin/memra gate model --backend cuda --fixtures tests/data >$OUT/gm-pinned.log 2>&1
echo "gate model (MEMRA_UPLOAD_PINNED=1) rc=$? $(tail -1 $OUT/gm-pinned.log)"
V=tests/data/tiny-dense.bf16.gguf
for spec in 35b-a3b:q4_k_m 9b:q4_k_m 27b:q4_k_m 9b:q8_0; do
  p=${spec%:*} ty=${spec#*:} f=/tmp/m.gguf
  [ $(( $(date +%s) - T0 )) -gt 330 ] && { echo "$spec skipped (time)"; continue; }
  rm -f $f
  timeout 120 .bin/memra mkmodel --preset $p --type $ty -o $f --vocab $V >$OUT/mk-$p-$ty.log 2>&1 ||
    { echo "$spec mkmodel failed"; tail -3 $OUT/mk-$p-$ty.log; continue; }
  A="-m $f --prefill 16 --reps 1 --depth 0 --decode-tokens 64"
  for r in 1 2; do
    for v in base plain pinned; do
      case $v in
        base) cmd=(.bin/memra-base) ;; plain) cmd=(.bin/memra) ;; pinned) cmd=(env MEMRA_UPLOAD_PINNED=1 .bin/memra) ;;
      esac
      timeout 90 "${cmd[@]}" bench $A >$OUT/$v-$p-$ty-$r.txt 2>&1
      echo "$spec $v r$r: $(grep 'decode  depth' $OUT/$v-$p-$ty-$r.txt || tail -1 $OUT/$v-$p-$ty-$r.txt)"
    done
  done
  timeout 90 .bin/memra-tl bench $A --timeline $OUT/tl-$p-$ty >$OUT/tl-$p-$ty.txt 2>&1
  echo "$spec tl: $(grep 'decode  depth' $OUT/tl-$p-$ty.txt || tail -1 $OUT/tl-$p-$ty.txt)"
  grep -A3 "kernel timeline" $OUT/tl-$p-$ty.txt | head -4
  python3 bench/timeline.py $OUT/tl-$p-$ty-d0.csv --first 0 2>&1 | tail -2
  if [ $spec = 9b:q4_k_m ]; then
    timeout 120 .bin/memra-tl bench -m $f --prefill 16 --reps 1 --depth 4096 --decode-tokens 64 \
      --timeline $OUT/tl-$p-$ty-deep >$OUT/tl-$p-$ty-deep.txt 2>&1
    echo "$spec tl depth 4096: $(grep 'decode  depth' $OUT/tl-$p-$ty-deep.txt || tail -1 $OUT/tl-$p-$ty-deep.txt)"
  fi
  gzip -f $OUT/tl-*.csv 2>/dev/null
  echo "t=$(( $(date +%s) - T0 ))"
done
