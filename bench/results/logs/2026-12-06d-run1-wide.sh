#!/bin/bash
# Run in session 23 as 2026-12-06d run 1 (written in session 22): MEMRA_MMVQ_WIDE=1, the int8 decode matvec with 2
# super-blocks a warp (up to 8 warps) where its grid has fewer blocks than the device has SMs (mmvq.cuh,
# mmvq_ks). 35b-a3b's ssm_out and attn_output {4096, 2048} are 128 blocks of 4 warps and ran at 19% of copy
# (bench/results/2026-12-06b-h100.md); 8 warps would put twice the bytes in flight on each SM. It changes those
# rows' K split, so their bits (still a function of the shape only).
# On the GPU machine from the repo root, binary and fixtures carried xz'd in .bin and .fix (one call, ~2 min):
#   1. the kernel gates of 35b-a3b, 9b, 27b, 0.8b and the model gate with the switch on;
#   2. 35b-a3b logits with and without it (max difference);
#   3. decode@0 A/B on 35b-a3b, 9b and 27b q4_k_m, two rounds.
# If 1 passes and 3 gains on 35b-a3b without a loss elsewhere, make it the default (mmvq_ks) and drop the
# switch.
set -u
T0=$(date +%s)
python3 -c "
import lzma,glob,os
for z in glob.glob('.fix/*.xz')+glob.glob('.bin/*.xz'):
    open(z[:-3],'wb').write(lzma.open(z).read()); os.remove(z)
"; chmod +x .bin/memra
B=.bin/memra OUT=${OUT:-/tmp/next-wide}
mkdir -p $OUT
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
for gm in 35b-a3b 9b 27b 0.8b; do
  MEMRA_MMVQ_WIDE=1 timeout 60 $B gate kernels --model $gm --seed 187 >>$OUT/gk.log 2>&1
  echo "WIDE=1 gate kernels $gm rc=$?"
done
grep -E "passed|FAIL" $OUT/gk.log
MEMRA_MMVQ_WIDE=1 timeout 60 $B gate model --backend cuda --fixtures tests/data --fixtures .fix >$OUT/gm.log 2>&1
echo "WIDE=1 gate model rc=$?"; grep -E "FAIL|checks" $OUT/gm.log | head
TOK=$(python3 -c "import random; random.seed(7); print(','.join(str(random.randrange(1000, 150000)) for _ in range(66)))")
for m in 35b-a3b:q4_k_m 9b:q4_k_m 27b:q4_k_m; do
  p=${m%%:*} t=${m##*:} f=/tmp/ab-$p-$t.gguf
  $B mkmodel --preset $p --type $t --vocab tests/data/tiny-dense.bf16.gguf -o $f >/dev/null 2>&1 || echo mkmodel failed
  if [ $p = 35b-a3b ]; then
    for v in 0 1; do
      MEMRA_MMVQ_WIDE=$v $B eval -m $f --backend cuda --ctx 256 --tokens $TOK --all -o /tmp/ev-$v.f32 2>>$OUT/ab.log
    done
    python3 -c "
import array
a=array.array('f'); b=array.array('f')
a.frombytes(open('/tmp/ev-0.f32','rb').read()); b.frombytes(open('/tmp/ev-1.f32','rb').read())
d=max(abs(x-y) for x,y in zip(a,b)); m=max(abs(x) for x in a)
print('$m eval 66 --all: WIDE=1 vs 0: max diff %.3e, max|logit| %.3e, ratio %.2e' % (d, m, d/m))"
  fi
  for r in 1 2; do for v in 0 1; do
    line=$(MEMRA_MMVQ_WIDE=$v $B bench -m $f --backend cuda --prefill 16 --depth 0 --decode-tokens 64 --reps 3 2>&1 |
      tee -a $OUT/ab.log | grep '^decode' | tr -s ' ')
    echo "$m r$r WIDE=$v: $line"; done; done
  rm -f $f /tmp/ev-*.f32
  echo "t=$(( $(date +%s) - T0 ))"
done 2>&1 | tee $OUT/ab.txt
