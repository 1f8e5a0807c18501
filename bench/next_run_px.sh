#!/bin/bash
# Written in session 36, not run yet (its device time was spent): the planes in the ring's slots, one device call
# (~3 min on an H100).
#  0. sb_lab (V0-V6; V5, V6 are new: the Q6_K int8 arithmetic's chain, for the next cut after PX).
#  1. mmvq_tm_lab variants 21, 22 (k_tx: a bulk-copy ring whose slots carry the prep's planes and per-limb sums,
#     read by mmvq_sb_lean) against production's pairs (0: file layout, 14: tile-major), the cp.async ring (7)
#     and the plain bulk ring (2), on the 9b and 27b decode shapes. Every output must be memcmp-equal to variant
#     0's ("== first yes").
#  2. gate kernels 9b on the default path (its k_mmvq_tm instances were rebuilt with the PX template and have not
#     run on a GPU since).
#  3. MEMRA_MMVQ_PX=1 (mmvq.cuh, k_mmvq_tm<.., PX = 1>: the same idea in the backend, the lanes' cp.async): gate
#     kernels 9b and 35b-a3b, 9b and 35b-a3b logits of 65 tokens (--all) cmp-equal to the default (same bits by
#     construction), decode@0 in interleaved rounds.
# If PX gains, make it the default (and extend it to the tight, tm3 and tm2 kernels and to T = 2); if not, remove
# it and k_tx.
#   Build here:  make -j2 BUILD=build-dev CUDA_ARCH=sm_90a DEPS=.deps && strip -o .bin/memra build-dev/memra
#                for l in mmvq_tm_lab sb_lab; do BUILD=build-lab REBUILD=1 bash bench/kernels/lab.sh $l &&
#                  strip -o .bin/$l build-lab/$l; done; xz -T2 -6 -f .bin/memra .bin/mmvq_tm_lab .bin/sb_lab
#   Device:      BUDGET=400 OUT=$OUT bash bench/next_run_px.sh   (carry .bin)
set -u
T0=$(date +%s); BUDGET=${BUDGET:-400}
left() { [ $(( $(date +%s) - T0 )) -lt $(( BUDGET - $1 )) ]; }
bash bench/unpack.sh .bin
B=.bin/memra
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
timeout 60 .bin/sb_lab; echo "sb_lab rc=$?"
for sh in "4096 12288" "12288 4096" "4096 4096" "4096 8192" "5120 17408" "6144 5120"; do
  left 300 || break
  echo "== $sh"; RINGX=1 timeout 60 .bin/mmvq_tm_lab $sh >/tmp/lab.txt 2>&1
  echo "rc=$?"; grep -v "^k_sk" /tmp/lab.txt
done
f=/tmp/m.gguf
dec() { env "$@" $B bench -m $f --backend cuda --prefill 16 --depth 0 --decode-tokens 64 --reps 3 2>&1 |
  grep '^decode' | tr -s ' '; }
TOK=$(python3 -c "import random; random.seed(7)
print(','.join(str(random.randrange(1000, 150000)) for _ in range(65)))")
timeout 90 $B gate kernels --model 9b --seed 369 >$OUT/gk-9b-default.log 2>&1
echo "default gate kernels 9b rc=$? $(grep -h 'passed' $OUT/gk-9b-default.log | tail -1)"
for m in 9b 35b-a3b; do
  left 100 || break
  MEMRA_MMVQ_PX=1 timeout 90 $B gate kernels --model $m --seed 369 >$OUT/gk-$m.log 2>&1
  echo "PX=1 gate kernels $m rc=$? $(grep -h 'passed' $OUT/gk-$m.log | tail -1)"
  grep -h FAIL $OUT/gk-$m.log | head -5
  $B mkmodel --preset $m --type q4_k_m --vocab tests/data/tiny-dense.bf16.gguf -o $f >/dev/null 2>&1 ||
    echo mkmodel failed
  $B eval -m $f --backend cuda --ctx 256 --tokens $TOK --all -o /tmp/ev-0.f32 2>/dev/null
  MEMRA_MMVQ_PX=1 $B eval -m $f --backend cuda --ctx 256 --tokens $TOK --all -o /tmp/ev-1.f32 2>/dev/null
  cmp /tmp/ev-0.f32 /tmp/ev-1.f32 && echo "$m eval 65 --all: PX=1 cmp-equal to the default"
  for r in 1 2; do
    left 30 || break
    echo "$m d0 r$r [default] $(dec MEMRA_NONE=0)"
    echo "$m d0 r$r [PX=1] $(dec MEMRA_MMVQ_PX=1)"
  done
  rm -f $f /tmp/ev-*.f32
done
cat $OUT/gk-*.log 2>/dev/null | gzip >$OUT/gk.log.gz; rm -f $OUT/gk-*.log
echo "t=$(( $(date +%s) - T0 ))"
