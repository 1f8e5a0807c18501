#!/bin/bash
# Session 25: chain_lab (bench/kernels/chain_lab.cu): P = 64 decode matvec pairs as a CUDA graph of production pairs
# against one persistent launch with grid barriers (outputs memcmp-equal). One call from the repo root, .bin/chain_lab
# carried xz'd (BUILD=build-lab REBUILD=1 bash bench/kernels/lab.sh chain_lab, stripped; ~2 min).
set -u
OUT=${OUT:-/tmp/next-chain}; mkdir -p $OUT
python3 -c "
import lzma,glob,os
for z in glob.glob('.bin/*.xz'):
    open(z[:-3],'wb').write(lzma.open(z).read()); os.remove(z)
"; chmod +x .bin/*
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
for s in "4096 12288" "12288 4096" "5120 17408" "4096 4096" "5120 6144" "2048 512"; do
  for d in 4 2; do
    [ $d = 2 ] && [ "$s" != "4096 12288" ] && [ "$s" != "4096 4096" ] && continue
    echo "== D=$d $s"; CHAIN_D=$d timeout 60 .bin/chain_lab $s; echo "rc=$?"
  done
done 2>&1 | tee $OUT/chain.txt
CHAIN_PER_SM=1 timeout 60 .bin/chain_lab 4096 12288 2>&1 | tee -a $OUT/chain.txt
