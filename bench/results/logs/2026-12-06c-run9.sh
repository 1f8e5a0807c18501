#!/bin/bash
# Session 22 call 9: matmul_multi's GEMM pairs (the GDN in-projections qkv and z in one k_gemm_wg launch where
# their types agree). .bin/memra-33: 33d32e7; .bin/memra: this tree. Gates; logits against 33d32e7 (9b and
# 35b-a3b keep their K split, so their bits; 27b's qkv and z go from S = 2 to 1); prefill 512 A/B.
set -u
T0=$(date +%s)
python3 -c "
import lzma,glob,os
for z in glob.glob('.fix/*.xz')+glob.glob('.bin/*.xz'):
    open(z[:-3],'wb').write(lzma.open(z).read()); os.remove(z)
"; chmod +x .bin/*
B=.bin/memra
for gm in 27b 9b 35b-a3b 0.8b; do
  timeout 60 $B gate kernels --model $gm --seed 186 >>$OUT/gk.log 2>&1
  echo "gate kernels $gm rc=$?"
done
grep -E "passed|FAIL" $OUT/gk.log
timeout 60 $B gate model --backend cuda --fixtures tests/data --fixtures .fix >$OUT/gm.log 2>&1
echo "gate model rc=$?"; grep -E "FAIL|checks" $OUT/gm.log | head
TOK=$(python3 -c "import random; random.seed(7); print(','.join(str(random.randrange(1000, 150000)) for _ in range(70)))")
for m in 27b:q4_k_m 9b:q4_k_m 35b-a3b:q4_k_m; do
  p=${m%%:*} t=${m##*:} f=/tmp/ab-$p-$t.gguf
  $B mkmodel --preset $p --type $t --vocab tests/data/tiny-dense.bf16.gguf -o $f >/dev/null 2>&1 || echo mkmodel failed
  .bin/memra-33 eval -m $f --backend cuda --ctx 256 --tokens $TOK --all -o /tmp/ev-0.f32 2>>$OUT/ab.log
  $B eval -m $f --backend cuda --ctx 256 --tokens $TOK --all -o /tmp/ev-1.f32 2>>$OUT/ab.log
  cmp -s /tmp/ev-0.f32 /tmp/ev-1.f32 && echo "$m eval 70 --all: new == 33d32e7" || python3 -c "
import array
a=array.array('f'); b=array.array('f')
a.frombytes(open('/tmp/ev-0.f32','rb').read()); b.frombytes(open('/tmp/ev-1.f32','rb').read())
d=max(abs(x-y) for x,y in zip(a,b)); m=max(abs(x) for x in a)
print('$m eval 70 --all: new vs 33d32e7: max diff %.3e, max|logit| %.3e, ratio %.2e' % (d, m, d/m))"
  if [ $p != 35b-a3b ]; then for r in 1 2; do for b in .bin/memra-33 .bin/memra; do
    line=$($b bench -m $f --backend cuda --prefill 512 --depth 0 --decode-tokens 4 --reps 3 2>&1 |
      tee -a $OUT/ab.log | grep '^prefill' | tr -s ' ')
    echo "$m r$r $b: $line"; done; done; fi
  rm -f $f /tmp/ev-*.f32
  echo "t=$(( $(date +%s) - T0 ))"
done 2>&1 | tee $OUT/ab.txt
