#!/bin/bash
# Session 22 call 3: where k_gemm_wg's time goes. (1) gemm_lab with the producers' L2 prefetch of the weight
# bytes LAB_PF steps ahead (0 = off), Q4_K 27b shapes and Q8_0 9b; (2) ncu sections (speed of light, warp
# states, scheduler, memory, source counters) on one FOLD launch of {5120, 17408}; (3) ncu durations of every
# kernel of one 27b q4_k_m 512-token prefill; (4) prefill A/B of MEMRA_GEMM_Q4F / MEMRA_GEMM_PF on 27b.
set -u
T0=$(date +%s)
python3 -c "
import lzma,glob,os
for z in glob.glob('.bin/*.xz'):
    open(z[:-3],'wb').write(lzma.open(z).read()); os.remove(z)
"; chmod +x .bin/memra .bin/gemm_lab
B=.bin/memra
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
for sh in "5120 17408 q4_k" "17408 5120 q4_k" "4096 12288 q8_0"; do
  for pf in 0 4 8 16; do
    echo "== gemm_lab 512 $sh LAB_PF=$pf"; LAB_PF=$pf .bin/gemm_lab 512 $sh 2>&1 | grep -E "TFLOP|FAIL|DIFFER"
  done
done 2>&1 | tee $OUT/lab.txt
echo "t=$(( $(date +%s) - T0 ))"
timeout 120 ncu --kernel-name-base mangled -k regex:k_gemm_wgILi12ELb0ELb1 -c 1 --section SpeedOfLight \
  --section WarpStateStats --section SchedulerStats --section MemoryWorkloadAnalysis --section Occupancy \
  --section SourceCounters --section ComputeWorkloadAnalysis .bin/gemm_lab 512 5120 17408 q4_k >$OUT/ncu-wg.txt 2>&1
echo "ncu wg rc=$? t=$(( $(date +%s) - T0 ))"
grep -E "Duration|Throughput|Busy|Eligible|Active Warps|Issued|No Eligible|Stall|stall" $OUT/ncu-wg.txt | head -40
f=/tmp/ab-27b.gguf
$B mkmodel --preset 27b --type q4_k_m --vocab tests/data/tiny-dense.bf16.gguf -o $f >/dev/null 2>&1 || echo mkmodel failed
timeout 200 ncu --clock-control none --csv --metrics gpu__time_duration.sum $B bench -m $f --backend cuda --prefill 512 \
  --depth 0 --decode-tokens 1 --reps 1 >$OUT/ncu-pf-27b.csv 2>$OUT/ncu-pf-27b.err
echo "ncu 27b rc=$? t=$(( $(date +%s) - T0 ))"
python3 bench/ncu_kernels.py $OUT/ncu-pf-27b.csv --from-embed 0 --top 30 | tee $OUT/ncu-pf-27b.txt
gzip -f $OUT/ncu-pf-27b.csv; rm -f $OUT/ncu-pf-27b.err
for r in 1 2; do for v in "0 0" "1 0" "1 8" "0 8"; do
  set -- $v
  line=$(MEMRA_GEMM_Q4F=$1 MEMRA_GEMM_PF=$2 $B bench -m $f --backend cuda --prefill 512 --depth 0 --decode-tokens 4 \
    --reps 3 2>&1 | grep '^prefill' | tr -s ' ')
  echo "27b r$r Q4F=$1 PF=$2: $line"; done; done 2>&1 | tee $OUT/ab.txt
rm -f $f
echo "t=$(( $(date +%s) - T0 ))"
