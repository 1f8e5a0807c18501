#!/bin/bash
# Session 21 call 1: bench/next_bench.sh (the 27b and 0.8b kernel gates on the tree of 362003b, then the four
# files through bench/run_gpu.sh), and before it ncu on one 35b-a3b q4_k_m decode step (every kernel's
# duration and DRAM bytes, kernels serialized) to see where the MoE step goes.
set -u
T0=$(date +%s)
python3 -c "
import lzma,glob,os
for z in glob.glob('.bin/*.xz'):
    open(z[:-3],'wb').write(lzma.open(z).read()); os.remove(z)
"; chmod +x .bin/memra
B=.bin/memra
f=/tmp/ncu-35b.gguf
$B mkmodel --preset 35b-a3b --type q4_k_m --vocab tests/data/tiny-dense.bf16.gguf -o $f >/dev/null 2>&1
timeout 150 ncu --clock-control none --csv --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum \
    $B bench -m $f --backend cuda --prefill 16 --depth 0 --decode-tokens 2 --reps 1 >$OUT/ncu-35b.csv 2>$OUT/ncu-35b.err
echo "ncu rc=$? t=$(( $(date +%s) - T0 ))"; gzip -f $OUT/ncu-35b.csv
rm -f $f
sed -i '/^python3 -c/,/^"; chmod/d' bench/next_bench.sh
bash bench/next_bench.sh
