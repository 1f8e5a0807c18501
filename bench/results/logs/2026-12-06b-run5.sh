#!/bin/bash
# Session 21 call 5: k_sgemm_f32 at 2 x 4 outputs a thread (128 threads) and k_att_pf's tile copies with their
# loads batched before the stores (attention.cu), against the tree of run 4 (.bin/memra-prev); the gate's F32
# windows floor their reference size at sum |w x| / sqrt(in) (cmd_gate.c; seed 172 failed in run 4). Gates,
# whole-model logits cmp'd against 362003b (.bin/memra-base; eval chunks of 64 take the prefill kernels),
# prefill 512 (two rounds) and 8192 A/B.
set -u
T0=$(date +%s)
python3 -c "
import lzma,glob,os
for z in glob.glob('.fix/*.xz')+glob.glob('.bin/*.xz'):
    open(z[:-3],'wb').write(lzma.open(z).read()); os.remove(z)
"; chmod +x .bin/memra*
B=.bin/memra
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
for gm in 35b-a3b 9b; do
  timeout 60 $B gate kernels --model $gm --seed 172 >>$OUT/gk.log 2>&1; echo "gate kernels $gm rc=$? t=$(( $(date +%s) - T0 ))"
done
grep -E "passed|FAIL" $OUT/gk.log | head; grep -E "shexp gate|attention-pf" $OUT/gk.log | head -8
timeout 60 $B gate model --backend cuda --fixtures tests/data --fixtures .fix >$OUT/gm.log 2>&1; echo "gate model rc=$? $(tail -1 $OUT/gm.log)"
TOK=$(python3 -c "import random; random.seed(7); print(','.join(str(random.randrange(1000, 150000)) for _ in range(70)))")
for m in 35b-a3b:q4_k_m 9b:q8_0; do
  p=${m%%:*} t=${m##*:} f=/tmp/ab-$p-$t.gguf
  $B mkmodel --preset $p --type $t --vocab tests/data/tiny-dense.bf16.gguf -o $f >/dev/null 2>&1 || echo mkmodel failed
  .bin/memra-base eval -m $f --backend cuda --ctx 256 --tokens $TOK --all -o /tmp/ev-base.f32 2>>$OUT/ab.log
  $B eval -m $f --backend cuda --ctx 256 --tokens $TOK --all -o /tmp/ev-new.f32 2>>$OUT/ab.log
  cmp /tmp/ev-base.f32 /tmp/ev-new.f32 && echo "$m eval 70 --all: new == base ($(stat -c %s /tmp/ev-new.f32) B)"
  for r in 1 2; do for v in prev new; do bin=$B; [ $v = prev ] && bin=.bin/memra-prev
    line=$($bin bench -m $f --backend cuda --prefill 512 --depth 0 --decode-tokens 4 --reps 3 2>&1 | tee -a $OUT/ab.log | grep '^prefill' | tr -s ' ')
    echo "$m r$r $v: $line"; done; done
  for v in prev new; do bin=$B; [ $v = prev ] && bin=.bin/memra-prev
    line=$($bin bench -m $f --backend cuda --prefill 8192 --depth 0 --decode-tokens 4 --reps 1 2>&1 | tee -a $OUT/ab.log | grep '^prefill' | tr -s ' ')
    echo "$m $v: $line"; done
  rm -f $f /tmp/ev-*.f32
  echo "t=$(( $(date +%s) - T0 ))"
done
