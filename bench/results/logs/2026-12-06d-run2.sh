#!/bin/bash
# 2026-12-06d run 2: k_gemm_wg's TMA variant (XT: x tiles by TMA, raw-weight rings; MEMRA_GEMM_TMA=1 / LAB_XT=1)
# and the WIDE rule (grids of [sms/2, sms) blocks; default on). Binaries from the dev machine in .bin (xz):
# memra and gemm_lab of this tree, gemm_lab_base of 35066a6 + LAB_DUMP.
#   1. gemm_lab: base (dump), this tree's default (held to base), XT (held to base), per shape;
#   2. MEMRA_GEMM_TMA=1: gate kernels 27b, 9b, 35b-a3b, 0.8b; gate model;
#   3. models: 27b logits TMA 0 vs 1 (cmp), prefill 512 A/B (TMA 0/1) on 27b, 9b q8_0, 9b q4_k_m, 35b-a3b;
#      decode@0 A/B WIDE 0/1 on 35b-a3b and 9b q4_k_m.
set -u
T0=$(date +%s)
OUT=${OUT:-/tmp/run2}; mkdir -p $OUT
python3 -c "
import lzma,glob,os
for z in glob.glob('.fix/*.xz')+glob.glob('.bin/*.xz'):
    open(z[:-3],'wb').write(lzma.open(z).read()); os.remove(z)
"; chmod +x .bin/*
B=.bin/memra
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
for s in "5120 17408 q4_k" "17408 5120 q4_k 4" "4096 12288 q4_k" "12288 4096 q4_k" "4096 12288 q8_0" "12288 4096 q8_0" \
         "17408 5120 q6_k 4"; do
  set -- $s; ks=${4:-1}
  LAB_KS=$ks LAB_DUMP=/tmp/d.bin .bin/gemm_lab_base 512 $1 $2 $3 > $OUT/l.txt 2>&1; echo "rc=$?" >> $OUT/l.txt
  LAB_KS=$ks LAB_CMP=/tmp/d.bin .bin/gemm_lab 512 $1 $2 $3 >> $OUT/l.txt 2>&1; echo "rc=$?" >> $OUT/l.txt
  LAB_KS=$ks LAB_XT=1 LAB_CMP=/tmp/d.bin .bin/gemm_lab 512 $1 $2 $3 >> $OUT/l.txt 2>&1; echo "rc=$?" >> $OUT/l.txt
  cat $OUT/l.txt >> $OUT/lab.txt
done
grep -E "gemm_lab:|k_gemm_wg |against|FAIL|DIFF|rc=[1-9]|rror" $OUT/lab.txt
echo "t=$(( $(date +%s) - T0 ))"
for gm in 27b 9b 35b-a3b 0.8b; do
  MEMRA_GEMM_TMA=1 timeout 60 $B gate kernels --model $gm --seed 188 >>$OUT/gk.log 2>&1
  echo "TMA=1 gate kernels $gm rc=$?"
done
grep -E "passed|FAIL" $OUT/gk.log | head -20
MEMRA_GEMM_TMA=1 timeout 60 $B gate model --backend cuda --fixtures tests/data --fixtures .fix >$OUT/gm.log 2>&1
echo "TMA=1 gate model rc=$?"; grep -E "FAIL|checks" $OUT/gm.log | head
echo "t=$(( $(date +%s) - T0 ))"
TOK=$(python3 -c "import random; random.seed(7); print(','.join(str(random.randrange(1000, 150000)) for _ in range(66)))")
for m in 27b:q4_k_m 9b:q8_0 9b:q4_k_m 35b-a3b:q4_k_m; do
  p=${m%%:*} t=${m##*:} f=/tmp/ab-$p-$t.gguf
  $B mkmodel --preset $p --type $t --vocab tests/data/tiny-dense.bf16.gguf -o $f >/dev/null 2>&1 || echo mkmodel failed
  if [ $m = 27b:q4_k_m ] || [ $m = 9b:q8_0 ]; then
    for v in 0 1; do
      MEMRA_GEMM_TMA=$v $B eval -m $f --backend cuda --ctx 256 --tokens $TOK --all -o /tmp/ev-$v.f32 2>>$OUT/ab.log
    done
    cmp /tmp/ev-0.f32 /tmp/ev-1.f32 && echo "$m eval 66 --all: TMA=1 logits cmp-equal to TMA=0"
  fi
  for r in 1 2; do for v in 0 1; do
    line=$(MEMRA_GEMM_TMA=$v $B bench -m $f --backend cuda --prefill 512 --depth 0 --decode-tokens 1 --reps 3 2>&1 |
      tee -a $OUT/ab.log | grep '^prefill' | tr -s ' ')
    echo "$m r$r TMA=$v: $line"; done; done
  if [ $m = 35b-a3b:q4_k_m ] || [ $m = 9b:q4_k_m ]; then
    for r in 1 2; do for v in 0 1; do
      line=$(MEMRA_MMVQ_WIDE=$v $B bench -m $f --backend cuda --prefill 16 --depth 0 --decode-tokens 64 --reps 3 2>&1 |
        tee -a $OUT/ab.log | grep '^decode' | tr -s ' ')
      echo "$m r$r WIDE=$v: $line"; done; done
  fi
  rm -f $f /tmp/ev-*.f32
  echo "t=$(( $(date +%s) - T0 ))"
done 2>&1 | tee $OUT/ab.txt
