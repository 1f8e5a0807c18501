#!/bin/bash
# The pending device call of sessions 27 and 28. From the repo root with .bin/memra (this tree,
# stripped) and .fix carried xz'd; parts in order of need, each skipped when BUDGET seconds would be passed
# (GATE_MODELS, TIGHT_GATE_MODELS, AB_MODELS: a shorter call); 8 files under $OUT, the most that come back:
#   1. the new default (one tile a warp for the swiglu pairs too): gate kernels 9b, 27b, 35b-a3b, 0.8b, gate model;
#      MEMRA_MMVQ_TIGHT=1 (k_mmvq_tm launch-bounded to 24 warps an SM): gate kernels 9b, 27b;
#      MEMRA_MMVQ_WIDE16=1 (16-warp blocks for the grids under the SM count: 35b-a3b's {4096, 2048}): 35b-a3b;
#      MEMRA_MOE_GU2=1 (k_moe_tc_gu2: gate and up tiles on separate warps, weights through shared memory): 35b-a3b;
#   2. per model (35b-a3b, 9b, 27b q4_k_m): logits of 66 tokens (eval --all) under MEMRA_MMVQ_TL=2 and under
#      MEMRA_MMVQ_TIGHT=1 (35b-a3b: also MEMRA_MOE_GU2=1) cmp-equal to the default (none moves a bit by design);
#      decode@0 [-, TIGHT] (35b-a3b: also GU2, WIDE16 + TIGHT), two rounds;
#      9b also: ncu's warp-state, source (stall sampling) and memory sections of 8 k_mmvq_tm launches of a step
#      (its details page and its SASS page as CSV);
#      35b-a3b also: the same ncu sections on 6 launches of k_moe_tc_gu / k_moe_tc_down;
#   3. the table: decode@0 and prefill 512 of 9b q4_k_m, 9b q8_0, 27b q4_k_m, 35b-a3b q4_k_m, default switches.
set -u
T0=$(date +%s); BUDGET=${BUDGET:-400}
left() { [ $(( $(date +%s) - T0 )) -lt $(( BUDGET - $1 )) ]; }
OUT=${OUT:-/tmp/next-run}; mkdir -p $OUT
bash bench/unpack.sh .bin .fix
B=.bin/memra
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
for gm in ${GATE_MODELS:-9b 27b 35b-a3b 0.8b}; do
  timeout 60 $B gate kernels --model $gm --seed 203 >>$OUT/gk.log 2>&1; echo "gate kernels $gm rc=$?"
done
for gm in ${TIGHT_GATE_MODELS:-9b 27b}; do
  MEMRA_MMVQ_TIGHT=1 timeout 60 $B gate kernels --model $gm --seed 204 >>$OUT/gk.log 2>&1
  echo "MEMRA_MMVQ_TIGHT=1 gate kernels $gm rc=$?"
done
for gm in ${WIDE16_GATE_MODELS:-35b-a3b}; do
  MEMRA_MMVQ_WIDE16=1 MEMRA_MMVQ_TIGHT=1 timeout 60 $B gate kernels --model $gm --seed 205 >>$OUT/gk.log 2>&1
  echo "MEMRA_MMVQ_WIDE16=1 MEMRA_MMVQ_TIGHT=1 gate kernels $gm rc=$?"
done
for gm in ${GU2_GATE_MODELS:-35b-a3b}; do
  MEMRA_MOE_GU2=1 timeout 60 $B gate kernels --model $gm --seed 206 >>$OUT/gk.log 2>&1
  echo "MEMRA_MOE_GU2=1 gate kernels $gm rc=$?"
done
timeout 60 $B gate model --backend cuda --fixtures tests/data --fixtures .fix >$OUT/gm.log 2>&1
echo "gate model rc=$?"
grep -E "passed|FAIL" $OUT/gk.log $OUT/gm.log | head -20
echo "t=$(( $(date +%s) - T0 ))"
# stalls NAME REGEX COUNT: ncu's sections on COUNT launches of kernels matching REGEX in a decode run of $f
# (memory workload too); its details page and its SASS page (CSV) under $OUT as ncu-NAME.txt, ncu-NAME-sass.csv.gz
stalls() {
  timeout 90 ncu -k regex:$2 -c $3 --section SpeedOfLight --section Occupancy --section SchedulerStats \
    --section WarpStateStats --section SourceCounters --section MemoryWorkloadAnalysis -o /tmp/ncu-$1 $B bench \
    -m $f --backend cuda --prefill 16 --depth 0 --decode-tokens 2 --reps 1 >>$OUT/ab.log 2>&1
  echo "ncu $1 rc=$?"
  ncu -i /tmp/ncu-$1.ncu-rep --page details >$OUT/ncu-$1.txt 2>&1
  ncu -i /tmp/ncu-$1.ncu-rep --page source --csv --print-source sass 2>&1 | gzip >$OUT/ncu-$1-sass.csv.gz
}
TOK=$(python3 -c "import random; random.seed(7)
print(','.join(str(random.randrange(1000, 150000)) for _ in range(66)))")
for m in ${AB_MODELS:-35b-a3b 9b 27b}; do
  left 80 || break
  f=/tmp/ab-$m.gguf
  $B mkmodel --preset $m --type q4_k_m --vocab tests/data/tiny-dense.bf16.gguf -o $f >/dev/null 2>&1 ||
    echo mkmodel failed
  $B eval -m $f --backend cuda --ctx 256 --tokens $TOK --all -o /tmp/ev-0.f32 2>>$OUT/ab.log
  cv="MEMRA_MMVQ_TL=2 MEMRA_MMVQ_TIGHT=1"; [ $m = 35b-a3b ] && cv="$cv MEMRA_MOE_GU2=1"
  for v in $cv; do
    env $v $B eval -m $f --backend cuda --ctx 256 --tokens $TOK --all -o /tmp/ev-1.f32 2>>$OUT/ab.log
    cmp /tmp/ev-0.f32 /tmp/ev-1.f32 && echo "$m eval 66 --all: $v logits cmp-equal to the default"
  done
  rm -f /tmp/ev-*.f32
  vs="- MEMRA_MMVQ_TIGHT=1"
  [ $m = 35b-a3b ] && vs="$vs MEMRA_MOE_GU2=1 MEMRA_MMVQ_WIDE16=1,MEMRA_MMVQ_TIGHT=1"
  for r in 1 2; do
    for v in $vs; do
      e=; [ $v != - ] && e=${v//,/ }
      d=$(env $e $B bench -m $f --backend cuda --prefill 16 --depth 0 --decode-tokens 64 --reps 3 2>&1 |
        tee -a $OUT/ab.log | grep '^decode' | tr -s ' ')
      echo "$m q4_k_m r$r [$v] $d"
    done
  done
  # where a decode step's kernels stall: ncu's warp state and source (stall sampling) sections
  [ $m = 9b ] && left 150 && stalls 9b k_mmvq_tm 8       # 8 of the matvecs
  [ $m = 35b-a3b ] && left 120 && stalls 35b k_moe_tc 6  # 3 each of the MoE pair, gu and down
  rm -f $f
  echo "t=$(( $(date +%s) - T0 ))"
done 2>&1 | tee $OUT/ab.txt
for m in 9b:q4_k_m 9b:q8_0 27b:q4_k_m 35b-a3b:q4_k_m; do
  left 45 || break
  p=${m%%:*} t=${m##*:} f=/tmp/ab-$p-$t.gguf
  $B mkmodel --preset $p --type $t --vocab tests/data/tiny-dense.bf16.gguf -o $f >/dev/null 2>&1 ||
    echo "mkmodel $m failed"
  echo "$m $($B bench -m $f --backend cuda --prefill 512 --depth 0 --decode-tokens 64 --reps 3 2>&1 |
    grep -E '^(copy|decode|prefill)' | tr -s ' ' | tr '\n' ';')"
  rm -f $f
done 2>&1 | tee $OUT/table.txt
echo "t=$(( $(date +%s) - T0 ))"
cd $OUT && tar czf logs.tar.gz gk.log gm.log ab.log && rm -f gk.log gm.log ab.log
