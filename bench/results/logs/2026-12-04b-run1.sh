#!/bin/bash
# session 17 run 1: gdn pre-wait loads + hoist, warp_route in registers, k_mmv6p (head)
set -u
T0=$(date +%s)
python3 -c "
import lzma,glob,os
for z in glob.glob('.fix/*.xz')+glob.glob('.bin/*.xz'):
    open(z[:-3],'wb').write(lzma.open(z).read()); os.remove(z)
"; chmod +x .bin/memra .bin/memra-base
B=.bin/memra
echo "== gate kernels --seed 152"
timeout 240 $B gate kernels --seed 152 > $OUT/gk.log 2>&1; echo rc=$? t=$(( $(date +%s) - T0 ))
grep -E "passed|FAIL|output|moe|gdn" $OUT/gk.log | head -60
echo "== gdn rows with MEMRA_GDN_AHEAD=8 (9b)"
MEMRA_GDN_AHEAD=8 timeout 100 $B gate kernels --model 9b --seed 152 2>&1 | grep -E "gdn|passed"
echo "== gate model"
timeout 100 $B gate model --backend cuda --fixtures tests/data --fixtures .fix > $OUT/gm.log 2>&1; echo rc=$? t=$(( $(date +%s) - T0 ))
grep -E "FAIL|passed|checks" $OUT/gm.log | tail -5
echo "== A/B decode"
for m in 9b:q4_k_m 35b-a3b:q4_k_m; do
  p=${m%%:*} t=${m##*:} f=/tmp/ab-$p-$t.gguf
  $B mkmodel --preset $p --type $t --vocab tests/data/tiny-dense.bf16.gguf -o $f > /dev/null 2>&1 || echo mkmodel failed
  for r in 1 2; do
    for v in base new mmv6p0; do
      bin=$B; e=; [ $v = base ] && bin=.bin/memra-base; [ $v = mmv6p0 ] && e=MEMRA_MMV6P=0
      line=$(env $e $bin bench -m $f --backend cuda --prefill 16 --depth 0 --decode-tokens 64 --reps 3 2>&1 | tee -a $OUT/ab.log | grep '^decode' | tr -s ' ')
      echo "$m r$r $v: $line"
    done
  done
  if [ $p = 35b-a3b ]; then
    $B bench -m $f --backend cuda --prefill 16 --depth 0 --decode-tokens 16 --reps 1 --profile > $OUT/prof-35b.txt 2>&1
    .bin/memra-base bench -m $f --backend cuda --prefill 16 --depth 0 --decode-tokens 16 --reps 1 --profile > $OUT/prof-35b-base.txt 2>&1
  else
    $B bench -m $f --backend cuda --prefill 16 --depth 0 --decode-tokens 16 --reps 1 --profile > $OUT/prof-9b.txt 2>&1
    .bin/memra-base bench -m $f --backend cuda --prefill 16 --depth 0 --decode-tokens 16 --reps 1 --profile > $OUT/prof-9b-base.txt 2>&1
    for r in 1 2; do for v in 4 8; do
      echo "prefill 512 AHEAD=$v r$r: $(MEMRA_GDN_AHEAD=$v $B bench -m $f --backend cuda --prefill 512 --depth 0 --decode-tokens 1 --reps 2 2>&1 | grep '^prefill' | tr -s ' ')"
    done; done
    timeout 120 ncu --clock-control none --metrics gpu__time_duration.sum -k regex:"k_gdn_(prep|scan|finish)" -c 6 $B bench -m $f --backend cuda --prefill 512 --depth 0 --decode-tokens 1 --reps 1 > $OUT/ncu-gdn.txt 2>&1
    grep -E "k_gdn|duration" $OUT/ncu-gdn.txt | head -12
  fi
  rm -f $f
  echo t=$(( $(date +%s) - T0 ))
done
for f in $OUT/prof-*.txt; do echo "-- $f"; grep -E "output |gdn |moe_block|ffn_gate_inp" $f | head -8; done
