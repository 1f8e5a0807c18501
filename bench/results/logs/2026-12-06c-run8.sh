#!/bin/bash
# Session 22 call 8: k_mmvq_tm at 3 blocks of 6 warps an SM for rows of 6,144 (mmvq_tm3, MEMRA_MMVQ_TM3=0 off):
# 27b's ssm_out / attn_output {6144, 5120}, 320 blocks, were 1.21 waves at 2 blocks an SM (run 7).
# .bin/memra-e6: e6b2bda; .bin/memra-tm3: this tree. Kernel gates; 27b logits of 66 tokens --all (chunks of 64
# and 2: the 2 take the T <= 2 kernel) cmp'd against e6b2bda; decode A/B.
set -u
T0=$(date +%s)
python3 -c "
import lzma,glob,os
for z in glob.glob('.bin/*.xz'):
    open(z[:-3],'wb').write(lzma.open(z).read()); os.remove(z)
"; chmod +x .bin/*
B=.bin/memra-tm3
for gm in 27b 35b-a3b; do
  timeout 60 $B gate kernels --model $gm --seed 185 >>$OUT/gk.log 2>&1
  echo "gate kernels $gm rc=$?"
done
grep -E "passed|FAIL" $OUT/gk.log
f=/tmp/ab-27b.gguf
$B mkmodel --preset 27b --type q4_k_m --vocab tests/data/tiny-dense.bf16.gguf -o $f >/dev/null 2>&1 || echo mkmodel failed
TOK=$(python3 -c "import random; random.seed(7); print(','.join(str(random.randrange(1000, 150000)) for _ in range(66)))")
.bin/memra-e6 eval -m $f --backend cuda --ctx 256 --tokens $TOK --all -o /tmp/ev-0.f32 2>>$OUT/ab.log
$B eval -m $f --backend cuda --ctx 256 --tokens $TOK --all -o /tmp/ev-1.f32 2>>$OUT/ab.log
cmp /tmp/ev-0.f32 /tmp/ev-1.f32 && echo "27b eval 66 --all: tm3 == e6b2bda ($(stat -c %s /tmp/ev-1.f32) B)"
for r in 1 2; do for v in "e6 1" "tm3 0" "tm3 1"; do
  set -- $v
  line=$(MEMRA_MMVQ_TM3=$2 .bin/memra-$1 bench -m $f --backend cuda --prefill 16 --depth 0 --decode-tokens 64 --reps 3 \
    2>&1 | tee -a $OUT/ab.log | grep '^decode' | tr -s ' ')
  echo "27b r$r $1 TM3=$2: $line"; done; done 2>&1 | tee $OUT/ab.txt
rm -f $f
echo "t=$(( $(date +%s) - T0 ))"
