#!/bin/bash
# Session 22 call 1, on the tree of f2c8dc7 (binary .bin/memra.xz from build-dev, fixtures .fix/*.xz):
# every model's kernel gate (the 27b and 0.8b ones were not run on the final tree of session 21), the model
# gate on the fixtures, the four files, then bench/next_gdn_run.sh (now logs/2026-12-06c-run1-gdn.sh) (MEMRA_GDN_T4 gates, logits cmp, A/B).
set -u
T0=$(date +%s)
python3 -c "
import lzma,glob,os
for z in glob.glob('.fix/*.xz')+glob.glob('.bin/*.xz'):
    open(z[:-3],'wb').write(lzma.open(z).read()); os.remove(z)
"; chmod +x .bin/memra
B=.bin/memra
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
for gm in 27b 0.8b; do
  timeout 60 $B gate kernels --model $gm --seed 181 >>$OUT/gk.log 2>&1
  echo "gate kernels $gm rc=$? t=$(( $(date +%s) - T0 ))"
done
grep -E "passed|FAIL" $OUT/gk.log
SKIP_BUILD=1 SKIP_KERNELS=1 BUILD=.bin FIXTURES="tests/data .fix" TIME_BUDGET=200 VOCAB=tests/data/tiny-dense.bf16.gguf \
  MODELS="9b:q4_k_m 35b-a3b:q4_k_m 9b:q8_0 27b:q4_k_m" OUT=$OUT/rg \
  BENCH_ARGS="--prefill 512,8192 --depth 0,4096 --decode-tokens 32 --reps 2" bash bench/run_gpu.sh 2>&1 | tail -14
rm -f /tmp/memra-bench-*.gguf
cp $OUT/rg/result.md $OUT/result.md; cp $OUT/rg/gates.txt $OUT/gates.txt; rm -rf $OUT/rg
echo "t=$(( $(date +%s) - T0 ))"
bash bench/results/logs/2026-12-06c-run1-gdn.sh 2>&1 | tee $OUT/gdn-t4.txt
echo "t=$(( $(date +%s) - T0 ))"
