#!/bin/bash
# Session 22 call 4: k_gemm_wg's K split (blockIdx.z; wg_ksplit picks S from the shape, MEMRA_GEMM_KSPLIT=0 turns
# it off), against the last wave's idle SMs: {17408, 5120} is 160 blocks at T = 512, 1.2 waves on 132 SMs.
#   1. gemm_lab at LAB_KS = 1, 2, 4 (CPU check, tokens 64-163 alone memcmp, accumulate, us incl. k_gemm_ksum);
#   2. memra gate kernels (27b, 9b, 35b-a3b, 0.8b) and gate model, split on (the default);
#   3. logits split vs not (max diff), prefill 512 / 8192 A/B on 27b q4_k_m, 9b q4_k_m, 35b-a3b q4_k_m.
set -u
T0=$(date +%s)
python3 -c "
import lzma,glob,os
for z in glob.glob('.fix/*.xz')+glob.glob('.bin/*.xz'):
    open(z[:-3],'wb').write(lzma.open(z).read()); os.remove(z)
"; chmod +x .bin/memra .bin/gemm_lab
B=.bin/memra
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
for sh in "17408 5120 q4_k" "17408 5120 q6_k" "6144 5120 q4_k" "5120 10240 q6_k" "5120 17408 q4_k"; do
  for ks in 1 2 4; do
    echo "== gemm_lab 512 $sh LAB_KS=$ks"; LAB_KS=$ks .bin/gemm_lab 512 $sh 2>&1 | grep -v "^gemm_lab:"
  done
done 2>&1 | tee $OUT/lab.txt | grep -E "==|TFLOP|FAIL|DIFFER"
echo "t=$(( $(date +%s) - T0 ))"
for gm in 27b 9b 35b-a3b 0.8b; do
  timeout 60 $B gate kernels --model $gm --seed 183 >>$OUT/gk.log 2>&1
  echo "gate kernels $gm rc=$?"
done
grep -E "passed|FAIL" $OUT/gk.log
timeout 60 $B gate model --backend cuda --fixtures tests/data --fixtures .fix >$OUT/gm.log 2>&1
echo "gate model rc=$?"; grep -E "FAIL|checks" $OUT/gm.log | head
echo "t=$(( $(date +%s) - T0 ))"
TOK=$(python3 -c "import random; random.seed(7); print(','.join(str(random.randrange(1000, 150000)) for _ in range(70)))")
for m in 27b:q4_k_m 9b:q4_k_m 35b-a3b:q4_k_m; do
  p=${m%%:*} t=${m##*:} f=/tmp/ab-$p-$t.gguf
  $B mkmodel --preset $p --type $t --vocab tests/data/tiny-dense.bf16.gguf -o $f >/dev/null 2>&1 || echo mkmodel failed
  for v in 0 1; do
    MEMRA_GEMM_KSPLIT=$v $B eval -m $f --backend cuda --ctx 256 --tokens $TOK --all -o /tmp/ev-$v.f32 2>>$OUT/ab.log
  done
  python3 -c "
import array
a=array.array('f'); b=array.array('f')
a.frombytes(open('/tmp/ev-0.f32','rb').read()); b.frombytes(open('/tmp/ev-1.f32','rb').read())
d=max(abs(x-y) for x,y in zip(a,b)); m=max(abs(x) for x in a)
print('$m eval 70 --all: KSPLIT on vs off: max diff %.3e, max|logit| %.3e, ratio %.2e' % (d, m, d/m))"
  for r in 1 2; do for v in 0 1; do
    line=$(MEMRA_GEMM_KSPLIT=$v $B bench -m $f --backend cuda --prefill 512 --depth 0 --decode-tokens 4 --reps 3 2>&1 |
      tee -a $OUT/ab.log | grep '^prefill' | tr -s ' ')
    echo "$m r$r KSPLIT=$v: $line"; done; done
  for v in 0 1; do
    line=$(MEMRA_GEMM_KSPLIT=$v $B bench -m $f --backend cuda --prefill 8192 --depth 0 --decode-tokens 4 --reps 1 2>&1 |
      tee -a $OUT/ab.log | grep '^prefill' | tr -s ' ')
    echo "$m KSPLIT=$v: $line"; done
  rm -f $f /tmp/ev-*.f32
  echo "t=$(( $(date +%s) - T0 ))"
done 2>&1 | tee $OUT/ab.txt
