#!/bin/bash
# Session 22 call 6: the swiglu pair in one k_gemm_wg launch (cuda_gemm_tc_pair; MEMRA_GEMM_PAIR=0 turns it
# off) and Q6_K's producers at 56 registers. .bin/memra-prev: b8a5f82 (the K split), .bin/memra: this tree.
#   1. gemm_lab Q6_K / Q4_K {17408, 5120} at S = 4;
#   2. gate kernels (27b, 9b, 35b-a3b, 0.8b), gate model;
#   3. logits cmp against memra-prev (the pair and the register budget must not move a bit), prefill A/B;
#   4. the four files through bench/run_gpu.sh.
set -u
T0=$(date +%s)
python3 -c "
import lzma,glob,os
for z in glob.glob('.fix/*.xz')+glob.glob('.bin/*.xz'):
    open(z[:-3],'wb').write(lzma.open(z).read()); os.remove(z)
"; chmod +x .bin/*
B=.bin/memra
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
for sh in "17408 5120 q6_k 4" "17408 5120 q4_k 4"; do
  set -- $sh
  echo "== gemm_lab 512 $1 $2 $3 LAB_KS=$4: $(LAB_KS=$4 .bin/gemm_lab 512 $1 $2 $3 2>&1 | grep -E 'TFLOP|FAIL|DIFFER' | tr -s ' ')"
done 2>&1 | tee $OUT/lab.txt
for gm in 27b 9b 35b-a3b 0.8b; do
  timeout 60 $B gate kernels --model $gm --seed 184 >>$OUT/gk.log 2>&1
  echo "gate kernels $gm rc=$?"
done
grep -E "passed|FAIL" $OUT/gk.log
timeout 60 $B gate model --backend cuda --fixtures tests/data --fixtures .fix >$OUT/gm.log 2>&1
echo "gate model rc=$?"; grep -E "FAIL|checks" $OUT/gm.log | head
echo "t=$(( $(date +%s) - T0 ))"
TOK=$(python3 -c "import random; random.seed(7); print(','.join(str(random.randrange(1000, 150000)) for _ in range(70)))")
for m in 27b:q4_k_m 9b:q4_k_m; do
  p=${m%%:*} t=${m##*:} f=/tmp/ab-$p-$t.gguf
  $B mkmodel --preset $p --type $t --vocab tests/data/tiny-dense.bf16.gguf -o $f >/dev/null 2>&1 || echo mkmodel failed
  .bin/memra-prev eval -m $f --backend cuda --ctx 256 --tokens $TOK --all -o /tmp/ev-0.f32 2>>$OUT/ab.log
  $B eval -m $f --backend cuda --ctx 256 --tokens $TOK --all -o /tmp/ev-1.f32 2>>$OUT/ab.log
  cmp /tmp/ev-0.f32 /tmp/ev-1.f32 && echo "$m eval 70 --all: new == b8a5f82 ($(stat -c %s /tmp/ev-1.f32) B)"
  for r in 1 2; do for b in .bin/memra-prev .bin/memra; do
    line=$($b bench -m $f --backend cuda --prefill 512 --depth 0 --decode-tokens 4 --reps 3 2>&1 |
      tee -a $OUT/ab.log | grep '^prefill' | tr -s ' ')
    echo "$m r$r $b: $line"; done; done
  rm -f $f /tmp/ev-*.f32
  echo "t=$(( $(date +%s) - T0 ))"
done 2>&1 | tee $OUT/ab.txt
SKIP_BUILD=1 SKIP_GATE=1 BUILD=.bin TIME_BUDGET=280 VOCAB=tests/data/tiny-dense.bf16.gguf OUT=$OUT/rg \
  MODELS="9b:q4_k_m 35b-a3b:q4_k_m 9b:q8_0 27b:q4_k_m" \
  BENCH_ARGS="--prefill 512,8192 --depth 0,4096 --decode-tokens 32 --reps 2" bash bench/run_gpu.sh 2>&1 | tail -24
cp $OUT/rg/result.md $OUT/result.md; cp $OUT/rg/bench.txt $OUT/bench.txt; rm -rf $OUT/rg /tmp/memra-bench-*.gguf
echo "t=$(( $(date +%s) - T0 ))"
