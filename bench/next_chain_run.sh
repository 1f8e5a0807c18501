#!/bin/bash
# Session 25, run 3: chain_lab with the two-level barrier (CHAIN_NSUB sub-groups) and the prep's sums spread over a
# block's warps. One call from the repo root, .bin/chain_lab carried xz'd (BUILD=build-lab REBUILD=1 bash
# bench/kernels/lab.sh chain_lab, stripped; ~4 min with the gates and the A/B below). {2048, 16} is one tile: a phase is almost only its barriers.
set -u
OUT=${OUT:-/tmp/next-chain}; mkdir -p $OUT
python3 -c "
import lzma,glob,os
for z in glob.glob('.bin/*.xz'):
    open(z[:-3],'wb').write(lzma.open(z).read()); os.remove(z)
"; chmod +x .bin/*
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
run() { echo "== $*"; env "$@" timeout 60 .bin/chain_lab $S; echo "rc=$?"; }
for S in "2048 16" "2048 512" "4096 4096" "4096 12288"; do
  run CHAIN_NSUB=16
  case "$S" in "2048 16"|"4096 4096") run CHAIN_NSUB=1; run CHAIN_NSUB=16 CHAIN_PER_SM=1;; esac
done 2>&1 | grep -v "^$" | tee $OUT/chain.txt
# the tree's binary (.bin/memra, .fix carried): GDN clusters on by default now; gates, then 35b-a3b A/B against off
B=.bin/memra
python3 -c "
import lzma,glob,os
for z in glob.glob('.fix/*.xz'):
    open(z[:-3],'wb').write(lzma.open(z).read()); os.remove(z)
"
for gm in 35b-a3b 9b; do
  timeout 40 $B gate kernels --model $gm --seed 197 >>$OUT/gk.log 2>&1; echo "gate kernels $gm rc=$?"
done
timeout 60 $B gate model --backend cuda --fixtures tests/data --fixtures .fix >$OUT/gm.log 2>&1; echo "gate model rc=$?"
grep -E "passed|FAIL" $OUT/gk.log $OUT/gm.log | head
BIN=$B MODELS=35b-a3b:q4_k_m ROUNDS=2 VARIANTS="- MEMRA_GDN_CLUSTER=0" OUT=$OUT bash bench/env_ab.sh 2>&1 | tee $OUT/ab.txt
