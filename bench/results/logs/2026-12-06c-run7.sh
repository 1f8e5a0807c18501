#!/bin/bash
# Session 22 call 7 (diagnostic, tree of e6b2bda): ncu sections (speed of light, occupancy, launch, warp states,
# memory) on the first decode launches of k_mmv6 and k_mmvq_tm in a 27b q4_k_m step: why 27b's 5120-row
# matvecs (320 blocks) stream at 36-49% of copy where the 1,088-block gate / up pair reaches 73%.
set -u
T0=$(date +%s)
python3 -c "
import lzma,glob,os
for z in glob.glob('.bin/*.xz'):
    open(z[:-3],'wb').write(lzma.open(z).read()); os.remove(z)
"; chmod +x .bin/*
B=.bin/memra
f=/tmp/ab-27b.gguf
$B mkmodel --preset 27b --type q4_k_m --vocab tests/data/tiny-dense.bf16.gguf -o $f >/dev/null 2>&1 || echo mkmodel failed
timeout 240 ncu -k regex:"k_mmv6|k_mmvq_tm" -c 12 --section SpeedOfLight --section Occupancy --section LaunchStats \
  --section WarpStateStats --section MemoryWorkloadAnalysis \
  $B bench -m $f --backend cuda --prefill 16 --depth 0 --decode-tokens 2 --reps 1 >$OUT/ncu-dec-27b.txt 2>&1
echo "ncu rc=$? t=$(( $(date +%s) - T0 ))"
grep -E "^  k_mmv|^  void k_mmv|Duration|DRAM Throughput|Registers Per|Achieved Occupancy|Theoretical Occupancy|Block Limit|Grid Size|Waves Per SM|Eligible Warps|Stall Long" $OUT/ncu-dec-27b.txt | head -150
rm -f $f
# The regex above also matched the 16-token prefill's k_mmv6g launches (and the head), so only three decode
# launches came back (logs/2026-12-06c-run7-ncu-dec-27b.txt.gz). Run 7b, the same machine right after:
#   ncu -k regex:"k_mmv6<|k_mmvq_tm" -c 10 (the same sections) .bin/memra bench -m $f --backend cuda --prefill 16 \
#     --depth 0 --decode-tokens 2 --reps 1      (logs/2026-12-06c-run7b-ncu-dec-27b.txt.gz: k_mmvq_tm only)
