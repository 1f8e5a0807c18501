#!/bin/bash
# Session 22 call 5: why the Q6_K GEMM runs at half of Q4_K's rate after the K split. (1) local-memory
# instructions in k_gemm_wg's SASS; (2) gemm_lab with the producers' register budget WS_PREG = 40 (default),
# 48, 56 (consumers 216 / 208 / 200); (3) ncu sections of the Q6_K kernel at S = 4; (4) ncu durations of one
# 27b q4_k_m 512-token prefill with the split (b8a5f82).
set -u
T0=$(date +%s)
python3 -c "
import lzma,glob,os
for z in glob.glob('.bin/*.xz'):
    open(z[:-3],'wb').write(lzma.open(z).read()); os.remove(z)
"; chmod +x .bin/*
B=.bin/memra
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
for f in gemm_lab gemm_lab_p48; do
  cuobjdump -sass .bin/$f > /tmp/$f.sass 2>&1
  python3 - /tmp/$f.sass <<'PY'
import sys,re
fn=None; c={}
for l in open(sys.argv[1]):
    m=re.search(r'Function : (\S+)',l)
    if m: fn=m.group(1); c[fn]=[0,0,0]; continue
    if fn and 'k_gemm_wg' in fn:
        if re.search(r'\bSTL\b',l): c[fn][0]+=1
        if re.search(r'\bLDL\b',l): c[fn][1]+=1
        if re.search(r'\bLDGSTS\b',l): c[fn][2]+=1
for k,v in c.items():
    if 'k_gemm_wg' in k: print(sys.argv[1], k, 'STL', v[0], 'LDL', v[1], 'LDGSTS', v[2])
PY
done 2>&1 | tee $OUT/sass.txt
grep -n -B3 -A3 "LDL\|STL" /tmp/gemm_lab.sass | head -60 > $OUT/sass-ldl.txt
for sh in "17408 5120 q6_k 4" "5120 10240 q6_k 2" "17408 5120 q4_k 4" "5120 17408 q4_k 1"; do
  set -- $sh
  for f in gemm_lab gemm_lab_p48 gemm_lab_p56; do
    echo "== $f 512 $1 $2 $3 LAB_KS=$4: $(LAB_KS=$4 .bin/$f 512 $1 $2 $3 2>&1 | grep -E 'TFLOP|FAIL|DIFFER' | tr -s ' ')"
  done
done 2>&1 | tee $OUT/lab.txt
echo "t=$(( $(date +%s) - T0 ))"
LAB_KS=4 timeout 120 ncu --kernel-name-base mangled -k regex:k_gemm_wgILi14 -c 1 --section SpeedOfLight \
  --section WarpStateStats --section SchedulerStats --section MemoryWorkloadAnalysis --print-details all \
  .bin/gemm_lab 512 17408 5120 q6_k >$OUT/ncu-q6.txt 2>&1
echo "ncu q6 rc=$? t=$(( $(date +%s) - T0 ))"
grep -iE "Duration|Issue Slots|Eligible|Stall|stall|Local|L1/TEX Hit|Warp Cycles" $OUT/ncu-q6.txt | head -40
f=/tmp/ab-27b.gguf
$B mkmodel --preset 27b --type q4_k_m --vocab tests/data/tiny-dense.bf16.gguf -o $f >/dev/null 2>&1 || echo mkmodel failed
timeout 200 ncu --clock-control none --csv --metrics gpu__time_duration.sum $B bench -m $f --backend cuda --prefill 512 \
  --depth 0 --decode-tokens 1 --reps 1 >$OUT/ncu-pf-27b.csv 2>/dev/null
echo "ncu 27b rc=$? t=$(( $(date +%s) - T0 ))"
python3 bench/ncu_kernels.py $OUT/ncu-pf-27b.csv --from-embed 6 --top 30 | tee $OUT/ncu-pf-27b.txt
gzip -f $OUT/ncu-pf-27b.csv
rm -f $f
echo "t=$(( $(date +%s) - T0 ))"
