#!/bin/bash
# Session 21 call 2: three changes that move no bits, A/B'd against the tree of 362003b (.bin/memra-base):
#  - k_mmv6 requests its first super-block's weights before the wait (mmv6.cuh);
#  - k_rmsnorm_mv (the MoE router) requests its weight rows before the wait (norm.cu);
#  - switches: MEMRA_TM_D=2|3|4 (k_mmvq_tm's ring depth), MEMRA_RMV_W=4|8 (router rows per block).
# Gates on the new binary (kernels 9b + 35b-a3b, model), whole-model logits cmp'd between the variants and the
# base binary, then decode tok/s at depth 0, two interleaved rounds; then a per-op profile of a 35b-a3b and a
# 9b q8_0 prefill of 512 tokens.
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
  timeout 90 $B gate kernels --model $gm --seed 170 >>$OUT/gk.log 2>&1; echo "gate kernels $gm rc=$? t=$(( $(date +%s) - T0 ))"
done
grep -E "passed|FAIL" $OUT/gk.log | head -20
timeout 120 $B gate model --backend cuda --fixtures tests/data --fixtures .fix >$OUT/gm.log 2>&1; echo "gate model rc=$? $(tail -1 $OUT/gm.log)"
TOK=$(python3 -c "import random; random.seed(7); print(','.join(str(random.randrange(1000, 150000)) for _ in range(70)))")
for m in 9b:q4_k_m 35b-a3b:q4_k_m; do
  p=${m%%:*} t=${m##*:} f=/tmp/ab-$p-$t.gguf
  $B mkmodel --preset $p --type $t --vocab tests/data/tiny-dense.bf16.gguf -o $f >/dev/null 2>&1 || echo mkmodel failed
  VARS="base new d3 d4"; [ $p = 35b-a3b ] && VARS="base new d3 d4 w8 w4"
  run() { # variant, then the command's arguments
    local v=$1; shift; local bin=$B; local env=""
    case $v in base) bin=.bin/memra-base;; d3) env="MEMRA_TM_D=3";; d4) env="MEMRA_TM_D=4";;
      w8) env="MEMRA_RMV_W=8";; w4) env="MEMRA_RMV_W=4";; esac
    env $env $bin "$@"
  }
  for v in $VARS; do
    run $v eval -m $f --backend cuda --ctx 256 --tokens $TOK --all -o /tmp/ev-$v.f32 2>>$OUT/ab.log
  done
  for v in $VARS; do
    [ $v = base ] || { cmp /tmp/ev-base.f32 /tmp/ev-$v.f32 && echo "$m eval 70 --all: $v == base ($(stat -c %s /tmp/ev-$v.f32) B)"; }
  done
  for r in 1 2; do
    for v in $VARS; do
      line=$(run $v bench -m $f --backend cuda --prefill 16 --depth 0 --decode-tokens 64 --reps 3 2>&1 | tee -a $OUT/ab.log | grep '^decode' | tr -s ' ')
      echo "$m r$r $v: $line"
    done
  done
  [ $p = 35b-a3b ] && $B bench -m $f --backend cuda --prefill 512 --depth 0 --decode-tokens 4 --reps 1 --profile \
      2>&1 | sed -n '/^prefill profile/,/^prefill /p' > $OUT/prof-35b-prefill512.txt
  if [ $p = 35b-a3b ]; then # where a decode launch of the MoE pair waits (one launch each, after 40 warm-up ones)
    for k in k_moe_tc_gu k_moe_tc_down "k_mmv6<"; do
      timeout 100 ncu -k "regex:$k" --launch-skip 40 --launch-count 1 --section SpeedOfLight --section WarpStateStats \
        --section SchedulerStats --section MemoryWorkloadAnalysis --section Occupancy --section LaunchStats \
        $B bench -m $f --backend cuda --prefill 16 --depth 0 --decode-tokens 8 --reps 1 >> $OUT/ncu-moe.txt 2>&1
      echo "ncu $k rc=$? t=$(( $(date +%s) - T0 ))"
    done
  fi
  rm -f $f /tmp/ev-*.f32
  echo "t=$(( $(date +%s) - T0 ))"
done
f=/tmp/ab-9b-q8_0.gguf
$B mkmodel --preset 9b --type q8_0 --vocab tests/data/tiny-dense.bf16.gguf -o $f >/dev/null 2>&1 || echo mkmodel failed
$B bench -m $f --backend cuda --prefill 512 --depth 0 --decode-tokens 4 --reps 1 --profile 2>&1 | \
  sed -n '/^prefill profile/,/^prefill /p' > $OUT/prof-9bq8-prefill512.txt
rm -f $f
head -14 $OUT/prof-35b-prefill512.txt $OUT/prof-9bq8-prefill512.txt
echo "t=$(( $(date +%s) - T0 ))"
