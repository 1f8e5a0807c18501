#!/bin/bash
# 2026-12-06d run 3: the tree with k_gemm_wg's TMA variant on by default for Q8_0 / Q4_K (MEMRA_GEMM_TMA=0: off)
# and its Q6_K form opt-in (MEMRA_GEMM_TMA6=1: one raw slot a producer). .bin: memra, gemm_lab, gemm_lab_p48
# (-DWS_PREG=48). 1. gemm_lab: Q6_K cp.async vs XT (held to the first's bits), Q4_K / Q8_0 XT at 40 vs 48
# producer registers; 2. MEMRA_GEMM_TMA6=1: gate kernels 27b, 9b, 35b-a3b, 0.8b, gate model; 3. 27b logits
# TMA6 0 vs 1, prefill 512 A/B on 27b and 35b-a3b; 4. the four files through bench/run_gpu.sh (defaults).
set -u
T0=$(date +%s)
OUT=${OUT:-/tmp/run3}; mkdir -p $OUT
python3 -c "
import lzma,glob,os
for z in glob.glob('.fix/*.xz')+glob.glob('.bin/*.xz'):
    open(z[:-3],'wb').write(lzma.open(z).read()); os.remove(z)
"; chmod +x .bin/*
B=.bin/memra
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
for s in "17408 5120 q6_k 4" "5120 10240 q6_k 2" "5120 17408 q4_k" "17408 5120 q4_k 4" "4096 12288 q8_0"; do
  set -- $s; ks=${4:-1}
  if [ $3 = q6_k ]; then
    LAB_KS=$ks LAB_DUMP=/tmp/d.bin .bin/gemm_lab 512 $1 $2 $3 > $OUT/l.txt 2>&1; echo "rc=$?" >> $OUT/l.txt
    LAB_KS=$ks LAB_XT=1 LAB_CMP=/tmp/d.bin .bin/gemm_lab 512 $1 $2 $3 >> $OUT/l.txt 2>&1; echo "rc=$?" >> $OUT/l.txt
  else
    LAB_KS=$ks LAB_XT=1 LAB_DUMP=/tmp/d.bin .bin/gemm_lab 512 $1 $2 $3 > $OUT/l.txt 2>&1; echo "rc=$?" >> $OUT/l.txt
    echo "WS_PREG=48:" >> $OUT/l.txt
    LAB_KS=$ks LAB_XT=1 LAB_CMP=/tmp/d.bin .bin/gemm_lab_p48 512 $1 $2 $3 >> $OUT/l.txt 2>&1; echo "rc=$?" >> $OUT/l.txt
  fi
  cat $OUT/l.txt >> $OUT/lab.txt
done
grep -E "gemm_lab:|k_gemm_wg  |against|FAIL|DIFF|rc=[1-9]|rror|PREG" $OUT/lab.txt
echo "t=$(( $(date +%s) - T0 ))"
for gm in 27b 9b 35b-a3b 0.8b; do
  MEMRA_GEMM_TMA6=1 timeout 60 $B gate kernels --model $gm --seed 189 >>$OUT/gk.log 2>&1
  echo "TMA6=1 gate kernels $gm rc=$?"
done
grep -E "passed|FAIL" $OUT/gk.log | head -20
MEMRA_GEMM_TMA6=1 timeout 60 $B gate model --backend cuda --fixtures tests/data --fixtures .fix >$OUT/gm.log 2>&1
echo "TMA6=1 gate model rc=$?"; grep -E "FAIL|checks" $OUT/gm.log | head
echo "t=$(( $(date +%s) - T0 ))"
TOK=$(python3 -c "import random; random.seed(7); print(','.join(str(random.randrange(1000, 150000)) for _ in range(66)))")
for m in 27b:q4_k_m 35b-a3b:q4_k_m; do
  p=${m%%:*} t=${m##*:} f=/tmp/ab-$p-$t.gguf
  $B mkmodel --preset $p --type $t --vocab tests/data/tiny-dense.bf16.gguf -o $f >/dev/null 2>&1 || echo mkmodel failed
  for v in 0 1; do
    MEMRA_GEMM_TMA6=$v $B eval -m $f --backend cuda --ctx 256 --tokens $TOK --all -o /tmp/ev-$v.f32 2>>$OUT/ab.log
  done
  cmp /tmp/ev-0.f32 /tmp/ev-1.f32 && echo "$m eval 66 --all: TMA6=1 logits cmp-equal to TMA6=0"
  for r in 1 2; do for v in 0 1; do
    line=$(MEMRA_GEMM_TMA6=$v $B bench -m $f --backend cuda --prefill 512 --depth 0 --decode-tokens 1 --reps 3 2>&1 |
      tee -a $OUT/ab.log | grep '^prefill' | tr -s ' ')
    echo "$m r$r TMA6=$v: $line"; done; done
  rm -f $f /tmp/ev-*.f32
  echo "t=$(( $(date +%s) - T0 ))"
done 2>&1 | tee $OUT/ab.txt
SKIP_BUILD=1 SKIP_GATE=1 BUILD=.bin TIME_BUDGET=270 VOCAB=tests/data/tiny-dense.bf16.gguf OUT=$OUT/rg \
  MODELS="9b:q4_k_m 35b-a3b:q4_k_m 9b:q8_0 27b:q4_k_m" \
  BENCH_ARGS="--prefill 512,8192 --depth 0,4096 --decode-tokens 32 --reps 2" bash bench/run_gpu.sh 2>&1 | tail -14
cp $OUT/rg/result.md $OUT/result.md; cp $OUT/rg/bench.txt $OUT/bench.txt; rm -rf $OUT/rg /tmp/memra-bench-*.gguf
echo "t=$(( $(date +%s) - T0 ))"
