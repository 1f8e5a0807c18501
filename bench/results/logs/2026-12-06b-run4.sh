#!/bin/bash
# Session 21 call 4: the narrow path's tokens per block (gemm.cu, narrow_fills: NT from the grid, not 16 for
# every T >= 16), on top of run 3's k_sgemm_f32 and run 2's early weight loads. Gates (9b, 35b-a3b kernels;
# model), whole-model logits cmp'd against the base binary (362003b) with prefill chunks of 64, prefill 512
# A/B (two rounds), then the four files through bench/run_gpu.sh.
set -u
T0=$(date +%s)
python3 -c "
import lzma,glob,os
for z in glob.glob('.fix/*.xz')+glob.glob('.bin/*.xz'):
    open(z[:-3],'wb').write(lzma.open(z).read()); os.remove(z)
"; chmod +x .bin/memra .bin/memra-base
B=.bin/memra
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
for gm in 9b 35b-a3b; do
  timeout 90 $B gate kernels --model $gm --seed 172 >>$OUT/gk.log 2>&1; echo "gate kernels $gm rc=$? t=$(( $(date +%s) - T0 ))"
done
grep -E "passed|FAIL" $OUT/gk.log | head
timeout 120 $B gate model --backend cuda --fixtures tests/data --fixtures .fix >$OUT/gm.log 2>&1; echo "gate model rc=$? $(tail -1 $OUT/gm.log)"
TOK=$(python3 -c "import random; random.seed(7); print(','.join(str(random.randrange(1000, 150000)) for _ in range(70)))")
for m in 9b:q8_0 35b-a3b:q4_k_m; do
  p=${m%%:*} t=${m##*:} f=/tmp/ab-$p-$t.gguf
  $B mkmodel --preset $p --type $t --vocab tests/data/tiny-dense.bf16.gguf -o $f >/dev/null 2>&1 || echo mkmodel failed
  for v in base new; do bin=$B; [ $v = base ] && bin=.bin/memra-base
    $bin eval -m $f --backend cuda --ctx 256 --tokens $TOK --all -o /tmp/ev-$v.f32 2>>$OUT/ab.log; done
  cmp /tmp/ev-base.f32 /tmp/ev-new.f32 && echo "$m eval 70 --all: new == base ($(stat -c %s /tmp/ev-new.f32) B)"
  for r in 1 2; do for v in base new; do bin=$B; [ $v = base ] && bin=.bin/memra-base
    line=$($bin bench -m $f --backend cuda --prefill 512 --depth 0 --decode-tokens 4 --reps 3 2>&1 | tee -a $OUT/ab.log | grep '^prefill' | tr -s ' ')
    echo "$m r$r $v: $line"; done; done
  rm -f $f /tmp/ev-*.f32
done
echo "t=$(( $(date +%s) - T0 ))"
SKIP_BUILD=1 SKIP_GATE=1 BUILD=.bin TIME_BUDGET=$(( 500 - ($(date +%s) - T0) )) VOCAB=tests/data/tiny-dense.bf16.gguf \
  MODELS="9b:q4_k_m 35b-a3b:q4_k_m 9b:q8_0 27b:q4_k_m" \
  BENCH_ARGS="--prefill 512,8192 --depth 0,4096 --decode-tokens 32 --reps 2" bash bench/run_gpu.sh 2>&1 | tail -24
echo "t=$(( $(date +%s) - T0 ))"
