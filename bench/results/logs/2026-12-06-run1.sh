#!/bin/bash
# Session 20's device call: the split argmax (misc.cu, MEMRA_ARGMAX_SPLIT=1), the rope angles before the wait
# (rope.cu), matmul_multi's side branch (matmul.cu, MEMRA_FORK) and the L2 prefetch (cuda.cu, MEMRA_PREFETCH=1)
# through the gates; whole-model logits of each against MEMRA_FORK=0 (cmp); decode A/B of each; an nsys
# timeline of one graph step. One binary, .bin/memra.xz, built on the dev machine (make -j2 BUILD=build-dev
# CUDA_ARCH=sm_90a DEPS=.deps), stripped. Fixtures in .fix (xz).
# (The machine had no nsys, so the last step printed "no nsys"; its helper, bench/nsys_step.py, was not kept.)
set -u
T0=$(date +%s)
python3 -c "
import lzma,glob,os
for z in glob.glob('.fix/*.xz')+glob.glob('.bin/*.xz'):
    open(z[:-3],'wb').write(lzma.open(z).read()); os.remove(z)
"; chmod +x .bin/memra
B=.bin/memra
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
export MEMRA_ARGMAX_SPLIT=1 # the gates below check the split kernel
echo "== gate kernels --seed 160 (9b, 35b-a3b)"
for gm in 9b 35b-a3b; do
  timeout 90 $B gate kernels --model $gm --seed 160 >>$OUT/gk.log 2>&1; echo "$gm rc=$? t=$(( $(date +%s) - T0 ))"
done
grep -E "passed|FAIL" $OUT/gk.log | head -30
grep -iE "argmax|rope|q4_k\+q6_k" $OUT/gk.log | head -40
echo "== gate model"
timeout 120 $B gate model --backend cuda --fixtures tests/data --fixtures .fix >$OUT/gm.log 2>&1; echo "rc=$? $(tail -1 $OUT/gm.log)"
echo "== A/B decode (depth 0), interleaved; t=$(( $(date +%s) - T0 ))"
for m in 9b:q4_k_m 35b-a3b:q4_k_m; do
  p=${m%%:*} t=${m##*:} f=/tmp/ab-$p-$t.gguf
  $B mkmodel --preset $p --type $t --vocab tests/data/tiny-dense.bf16.gguf -o $f >/dev/null 2>&1 || echo mkmodel failed
  if [ $p = 9b ]; then
    TOK=$(python3 -c "import random; random.seed(7); print(','.join(str(random.randrange(1000, 150000)) for _ in range(70)))")
    for v in 00 10 11; do # MEMRA_FORK, MEMRA_PREFETCH
      export MEMRA_FORK=${v:0:1} MEMRA_PREFETCH=${v:1:1}
      $B eval -m $f --backend cuda --ctx 256 --tokens $TOK --all -o /tmp/ev70-$v.f32 2>>$OUT/ab.log
      $B eval -m $f --backend cuda --ctx 256 --tokens 4242 -o /tmp/ev1-$v.f32 2>>$OUT/ab.log
    done
    unset MEMRA_FORK MEMRA_PREFETCH
    for v in 10 11; do
      cmp /tmp/ev70-00.f32 /tmp/ev70-$v.f32 && echo "eval 70 --all: FORK,PREFETCH $v == 00 ($(stat -c %s /tmp/ev70-$v.f32) B)"
      cmp /tmp/ev1-00.f32 /tmp/ev1-$v.f32 && echo "eval 1: FORK,PREFETCH $v == 00 ($(stat -c %s /tmp/ev1-$v.f32) B)"
    done
  fi
  for r in 1 2; do
    for v in base split fork pf; do
      sp=1 fk=0 pf=0; [ $v = base ] && sp=0; [ $v = fork ] && fk=1; [ $v = pf ] && fk=1 pf=1
      line=$(MEMRA_ARGMAX_SPLIT=$sp MEMRA_FORK=$fk MEMRA_PREFETCH=$pf $B bench -m $f --backend cuda --prefill 16 \
        --depth 0 --decode-tokens 64 --reps 3 2>&1 | tee -a $OUT/ab.log | grep '^decode' | tr -s ' ')
      echo "$m r$r $v: $line"
    done
  done
  if [ $p = 9b ]; then
    NS=$(command -v nsys || ls /usr/local/cuda*/bin/nsys /opt/nvidia/nsight-systems*/bin/nsys 2>/dev/null | head -1)
    if [ -n "$NS" ]; then
      timeout 120 $NS profile -t cuda --cuda-graph-trace=node -o /tmp/nsys9b -f true $B bench -m $f --backend cuda \
        --prefill 16 --depth 0 --decode-tokens 8 --reps 1 >/dev/null 2>&1
      timeout 60 $NS stats -r cuda_gpu_trace -f csv -o /tmp/nsys9b /tmp/nsys9b.nsys-rep >/dev/null 2>&1
      python3 bench/nsys_step.py /tmp/nsys9b_cuda_gpu_trace.csv > $OUT/nsys-9b-step.txt 2>&1; head -40 $OUT/nsys-9b-step.txt
    else echo "no nsys"; fi
  fi
  rm -f $f
  echo "t=$(( $(date +%s) - T0 ))"
done
