#!/bin/bash
# Written in session 21 as bench/next_gdn_run.sh, run in session 22 (call 1, logs/2026-12-06c-run1-gdn-t4.txt:
# the same bits, no gain; the switch was removed): MEMRA_GDN_T4=1, the GDN prefill scan with the
# four columns' warp sums by gdn_sum4_t (gdn.cu: 6 shuffles a sum of four instead of 20; the same bits by
# design, checked in a Python model of the lanes on 20,000 random cases). ncu had the scan at 300 us a layer
# at T = 512 (14% of a 35b-a3b and 11% of a 9b q8_0 prefill, bench/results/2026-12-06b-h100.md), with four
# columns x two warp sums x 5 shuffles a token and a warp: if the shuffles bound it, this is the fix.
# On the GPU machine from the repo root, binary and fixtures carried xz'd in .bin and .fix (one call, ~2 min):
#   1. the kernel gates of 9b and 35b-a3b with and without the switch: the gdn-scan-inv rows memcmp the scan's
#      rows and states against the token-at-a-time kernel;
#   2. whole-model logits with and without it, cmp (chunks of 64 take the scan);
#   3. prefill 512 and 8192 A/B on 35b-a3b and 9b q8_0.
# If 1 and 2 are clean and 3 gains, make it the default (gdn.cu, gdn_scan_run) and drop the switch.
set -u
T0=$(date +%s)
python3 -c "
import lzma,glob,os
for z in glob.glob('.fix/*.xz')+glob.glob('.bin/*.xz'):
    open(z[:-3],'wb').write(lzma.open(z).read()); os.remove(z)
"; chmod +x .bin/memra
B=.bin/memra OUT=${OUT:-/tmp/next-gdn}
mkdir -p $OUT
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
for v in 0 1; do
  for gm in 9b 35b-a3b; do
    MEMRA_GDN_T4=$v timeout 60 $B gate kernels --model $gm --seed 173 >>$OUT/gk-$v.log 2>&1
    echo "T4=$v gate kernels $gm rc=$?"
  done
  grep -E "passed|FAIL" $OUT/gk-$v.log; grep "gdn-scan-inv" $OUT/gk-$v.log | head -4
done
TOK=$(python3 -c "import random; random.seed(7); print(','.join(str(random.randrange(1000, 150000)) for _ in range(70)))")
for m in 35b-a3b:q4_k_m 9b:q8_0; do
  p=${m%%:*} t=${m##*:} f=/tmp/ab-$p-$t.gguf
  $B mkmodel --preset $p --type $t --vocab tests/data/tiny-dense.bf16.gguf -o $f >/dev/null 2>&1 || echo mkmodel failed
  for v in 0 1; do
    MEMRA_GDN_T4=$v $B eval -m $f --backend cuda --ctx 256 --tokens $TOK --all -o /tmp/ev-$v.f32 2>>$OUT/ab.log
  done
  cmp /tmp/ev-0.f32 /tmp/ev-1.f32 && echo "$m eval 70 --all: T4=1 == T4=0 ($(stat -c %s /tmp/ev-1.f32) B)"
  for r in 1 2; do for v in 0 1; do
    line=$(MEMRA_GDN_T4=$v $B bench -m $f --backend cuda --prefill 512 --depth 0 --decode-tokens 4 --reps 3 2>&1 |
      tee -a $OUT/ab.log | grep '^prefill' | tr -s ' ')
    echo "$m r$r T4=$v: $line"; done; done
  for v in 0 1; do
    line=$(MEMRA_GDN_T4=$v $B bench -m $f --backend cuda --prefill 8192 --depth 0 --decode-tokens 4 --reps 1 2>&1 |
      tee -a $OUT/ab.log | grep '^prefill' | tr -s ' ')
    echo "$m T4=$v: $line"; done
  rm -f $f /tmp/ev-*.f32
  echo "t=$(( $(date +%s) - T0 ))"
done
