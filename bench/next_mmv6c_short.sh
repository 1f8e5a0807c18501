#!/bin/bash
# next_mmv6c_run.sh cut to what ~200 s of device time hold: the switches' first check and the 27b A/B.
#   1. MEMRA_MMV6C=2 gate kernels 9b (k_mmv6c on every T <= 4 Q6_K shape; 25 s: a hang must not eat the call);
#   2. MEMRA_MMV6B=2 MEMRA_MMV6C=1 gate kernels 27b, 9b;
#   3. 27b q4_k_m: logits cmp (combined against the default), decode@0 A/B of default, MMV6B=2, MMV6C=1, both;
#   4. 9b q4_k_m: default against both, if time is left.
set -u
T0=$(date +%s)
OUT=${OUT:-/tmp/next-mmv6c}; mkdir -p $OUT
python3 -c "
import lzma,glob,os
for z in glob.glob('.bin/*.xz')+['.fix/tiny-dense.bf16.gguf.xz']:
    if os.path.exists(z): open(z[:-3],'wb').write(lzma.open(z).read()); os.remove(z)
"; chmod +x .bin/*
B=.bin/memra
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
MEMRA_MMV6C=2 timeout 25 $B gate kernels --model 9b --seed 194 >$OUT/smoke.log 2>&1; rc=$?
echo "MMV6C=2 gate kernels 9b rc=$rc"; grep -E "passed|FAIL" $OUT/smoke.log | head -8
C_OK=1; [ $rc = 124 ] && C_OK=0
BOTH="MEMRA_MMV6B=2 MEMRA_MMV6C=1"; [ $C_OK = 0 ] && BOTH="MEMRA_MMV6B=2"
for gm in 27b 9b; do
  env $BOTH timeout 25 $B gate kernels --model $gm --seed 195 >>$OUT/gk.log 2>&1; echo "$BOTH gate kernels $gm rc=$?"
done
grep -E "passed|FAIL" $OUT/gk.log | head -10
echo "t=$(( $(date +%s) - T0 ))"
TOK=$(python3 -c "import random; random.seed(7); print(','.join(str(random.randrange(1000, 150000)) for _ in range(66)))")
CFGS=("MEMRA_MMV6C=0" "MEMRA_MMV6B=2" "MEMRA_MMV6C=1" "$BOTH")
for m in 27b:q4_k_m 9b:q4_k_m; do
  p=${m%%:*} t=${m##*:} f=/tmp/ab-$p-$t.gguf
  [ $(( $(date +%s) - T0 )) -gt 130 ] && { echo "$m: skipped (time)"; continue; }
  $B mkmodel --preset $p --type $t --vocab tests/data/tiny-dense.bf16.gguf -o $f >/dev/null 2>&1 || echo mkmodel failed
  if [ $p = 27b ]; then
    $B eval -m $f --backend cuda --ctx 128 --tokens $TOK --all -o /tmp/ev-base.f32 2>>$OUT/ab.log
    env $BOTH $B eval -m $f --backend cuda --ctx 128 --tokens $TOK --all -o /tmp/ev-c.f32 2>>$OUT/ab.log
    cmp /tmp/ev-base.f32 /tmp/ev-c.f32 >/dev/null && echo "$m $BOTH: logits cmp-equal" || echo "$m $BOTH: LOGITS DIFFER"
    CS="0 1 2 3 0 3"
  else
    CS="0 3 0 3"
  fi
  for c in $CS; do
    line=$(env ${CFGS[$c]} $B bench -m $f --backend cuda --prefill 16 --depth 0 --decode-tokens 48 --reps 3 2>&1 |
      tee -a $OUT/ab.log | grep '^decode' | tr -s ' ')
    echo "$m ${CFGS[$c]}: $line t=$(( $(date +%s) - T0 ))"
  done
  rm -f $f /tmp/ev-*.f32
done 2>&1 | tee $OUT/ab.txt
