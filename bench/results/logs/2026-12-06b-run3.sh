#!/bin/bash
# Session 21 call 3: k_sgemm_f32 (the MoE router at T >= 16) with the next 32-column tile's loads in flight
# (gemm.cu; the same fmaf chains, so the same bits). Gates on the new binary, whole-model logits of a 35b-a3b
# prefill cmp'd against the base binary (362003b), prefill 512 A/B, then ncu: every kernel's duration in one
# 512-token prefill of 35b-a3b q4_k_m and of 9b q8_0 (bench/ncu_kernels.py sums them by kernel and grid).
set -u
T0=$(date +%s)
python3 -c "
import lzma,glob,os
for z in glob.glob('.fix/*.xz')+glob.glob('.bin/*.xz'):
    open(z[:-3],'wb').write(lzma.open(z).read()); os.remove(z)
"; chmod +x .bin/memra .bin/memra-base
B=.bin/memra
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
timeout 90 $B gate kernels --model 35b-a3b --seed 171 >>$OUT/gk.log 2>&1; echo "gate kernels rc=$? t=$(( $(date +%s) - T0 ))"
grep -E "passed|FAIL" $OUT/gk.log | head; grep -iE "sgemm|router|f32" $OUT/gk.log | head -8
timeout 120 $B gate model --backend cuda --fixtures tests/data --fixtures .fix >$OUT/gm.log 2>&1; echo "gate model rc=$? $(tail -1 $OUT/gm.log)"
TOK=$(python3 -c "import random; random.seed(7); print(','.join(str(random.randrange(1000, 150000)) for _ in range(70)))")
for m in 35b-a3b:q4_k_m 9b:q8_0; do
  p=${m%%:*} t=${m##*:} f=/tmp/ab-$p-$t.gguf
  $B mkmodel --preset $p --type $t --vocab tests/data/tiny-dense.bf16.gguf -o $f >/dev/null 2>&1 || echo mkmodel failed
  if [ $p = 35b-a3b ]; then
    for v in base new; do bin=$B; [ $v = base ] && bin=.bin/memra-base
      $bin eval -m $f --backend cuda --ctx 256 --tokens $TOK --all -o /tmp/ev-$v.f32 2>>$OUT/ab.log; done
    cmp /tmp/ev-base.f32 /tmp/ev-new.f32 && echo "$m eval 70 --all: new == base ($(stat -c %s /tmp/ev-new.f32) B)"
    for r in 1 2; do for v in base new; do bin=$B; [ $v = base ] && bin=.bin/memra-base
      line=$($bin bench -m $f --backend cuda --prefill 512 --depth 0 --decode-tokens 4 --reps 3 2>&1 | tee -a $OUT/ab.log | grep '^prefill' | tr -s ' ')
      echo "$m r$r $v: $line"; done; done
  fi
  timeout 150 ncu --clock-control none --csv --metrics gpu__time_duration.sum $B bench -m $f --backend cuda --prefill 512 \
    --depth 0 --decode-tokens 1 --reps 1 >$OUT/ncu-pf-$p.csv 2>$OUT/ncu-pf-$p.err
  echo "ncu rc=$? t=$(( $(date +%s) - T0 ))"
  python3 bench/ncu_kernels.py $OUT/ncu-pf-$p.csv | head -22
  gzip -f $OUT/ncu-pf-$p.csv
  rm -f $f /tmp/ev-*.f32
done
echo "t=$(( $(date +%s) - T0 ))"
