#!/bin/bash
# NOT RUN (session 19 had no device time left): the split argmax (misc.cu, opt-in MEMRA_ARGMAX_SPLIT=1).
# base = the one-block kernel (the default), new = MEMRA_ARGMAX_SPLIT=1; one binary, .bin/memra.xz, built on
# the dev machine (make -j2 BUILD=build-dev CUDA_ARCH=sm_90a DEPS=.deps), stripped. Fixtures in .fix (xz).
set -u
T0=$(date +%s)
export MEMRA_ARGMAX_SPLIT=1 # the gates below check the split kernel
python3 -c "
import lzma,glob,os
for z in glob.glob('.fix/*.xz')+glob.glob('.bin/*.xz'):
    open(z[:-3],'wb').write(lzma.open(z).read()); os.remove(z)
"; chmod +x .bin/memra
B=.bin/memra
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
echo "== gate kernels --seed 154 (9b, 35b-a3b)"
for gm in 9b 35b-a3b; do
  timeout 60 $B gate kernels --model $gm --seed 154 >>$OUT/gk.log 2>&1; echo "$gm rc=$? t=$(( $(date +%s) - T0 ))"
done
MEMRA_ARGMAX_SPLIT=0 timeout 60 $B gate kernels --model 9b --seed 154 2>&1 | grep -E "passed|argmax"
grep -E "passed|FAIL|argmax" $OUT/gk.log | head -30
echo "== gate model"
timeout 100 $B gate model --backend cuda --fixtures tests/data --fixtures .fix >$OUT/gm.log 2>&1; echo "rc=$? $(tail -1 $OUT/gm.log)"
echo "== A/B decode (depth 0), interleaved"
for m in 9b:q4_k_m 35b-a3b:q4_k_m; do
  p=${m%%:*} t=${m##*:} f=/tmp/ab-$p-$t.gguf
  $B mkmodel --preset $p --type $t --vocab tests/data/tiny-dense.bf16.gguf -o $f >/dev/null 2>&1 || echo mkmodel failed
  for r in 1 2; do
    for v in base new; do
      sp=1; [ $v = base ] && sp=0
      line=$(MEMRA_ARGMAX_SPLIT=$sp $B bench -m $f --backend cuda --prefill 16 --depth 0 --decode-tokens 64 --reps 3 2>&1 | tee -a $OUT/ab.log | grep '^decode' | tr -s ' ')
      echo "$m r$r $v: $line"
    done
  done
  if [ $p = 9b ]; then
    timeout 60 ncu --clock-control none --metrics gpu__time_duration.sum -k regex:k_argmax $B bench -m $f --backend cuda --prefill 16 --depth 0 --decode-tokens 2 --reps 1 >$OUT/ncu-argmax.txt 2>&1
    grep -E "k_argmax|duration" $OUT/ncu-argmax.txt | head -6
  fi
  rm -f $f
  echo "t=$(( $(date +%s) - T0 ))"
done
