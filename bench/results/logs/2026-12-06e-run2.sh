#!/bin/bash
# Run in session 24 as 2026-12-06e run 2 (written in session 23 as 2026-12-06d-run4.sh, not run then).
# 2026-12-06d run 4: the session's final tree (k_gemm_wg's TMA variant by default for Q8_0, Q4_K and Q6_K; the wide
# decode K split for grids of [sms/2, sms) blocks). .bin/memra from the dev machine (xz). Gates (seed 190), the four
# files through bench/run_gpu.sh, then ncu durations of one 27b q4_k_m prefill of 512 tokens.
set -u
T0=$(date +%s)
OUT=${OUT:-/tmp/run4}; mkdir -p $OUT
python3 -c "
import lzma,glob,os
for z in glob.glob('.fix/*.xz')+glob.glob('.bin/*.xz'):
    open(z[:-3],'wb').write(lzma.open(z).read()); os.remove(z)
"; chmod +x .bin/*
B=.bin/memra
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
for gm in 27b 9b 35b-a3b 0.8b; do
  timeout 60 $B gate kernels --model $gm --seed 190 >>$OUT/gk.log 2>&1
  echo "gate kernels $gm rc=$?"
done
grep -E "passed|FAIL" $OUT/gk.log | head -20
timeout 60 $B gate model --backend cuda --fixtures tests/data --fixtures .fix >$OUT/gm.log 2>&1
echo "gate model rc=$?"; grep -E "FAIL|checks" $OUT/gm.log | head
echo "t=$(( $(date +%s) - T0 ))"
SKIP_BUILD=1 SKIP_GATE=1 BUILD=.bin TIME_BUDGET=200 VOCAB=tests/data/tiny-dense.bf16.gguf OUT=$OUT/rg \
  MODELS="9b:q4_k_m 35b-a3b:q4_k_m 9b:q8_0 27b:q4_k_m" \
  BENCH_ARGS="--prefill 512,8192 --depth 0,4096 --decode-tokens 32 --reps 2" bash bench/run_gpu.sh 2>&1 | tail -24
cp $OUT/rg/result.md $OUT/result.md; cp $OUT/rg/bench.txt $OUT/bench.txt; rm -rf $OUT/rg
echo "t=$(( $(date +%s) - T0 ))"
f=/tmp/ncu-27b.gguf
$B mkmodel --preset 27b --type q4_k_m --vocab tests/data/tiny-dense.bf16.gguf -o $f >/dev/null 2>&1 || echo mkmodel failed
[ $(( $(date +%s) - T0 )) -lt 160 ] && timeout 90 ncu --clock-control none --csv --metrics gpu__time_duration.sum \
  $B bench -m $f --backend cuda --prefill 512 --depth 0 --decode-tokens 1 --reps 1 >$OUT/ncu-pf-27b.csv 2>/dev/null
echo "ncu 27b rc=$? t=$(( $(date +%s) - T0 ))"
python3 bench/ncu_kernels.py $OUT/ncu-pf-27b.csv --from-embed 6 --top 24 | tee $OUT/ncu-pf-27b.txt
gzip -f $OUT/ncu-pf-27b.csv
rm -f /tmp/memra-bench-*.gguf $f
echo "t=$(( $(date +%s) - T0 ))"
