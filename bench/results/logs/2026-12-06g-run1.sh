#!/bin/bash
# Session 25, run 3 (bench/next_tm2_run.sh). One call from the repo root, .bin/memra, .bin/chain_lab,
# .bin/mmvq_tm_lab (BUILD=build-lab REBUILD=1 bash bench/kernels/lab.sh NAME, stripped) and .fix carried xz'd
# (~7 min; the parts in order of need, each skipped when BUDGET seconds would be passed):
#   0. mmvq_tm_lab q6_k on the Q6_K decode shapes: variants 15-20 (Q6_K tile-major, field-major or blocks
#      intact, through a cp.async ring; must be memcmp-equal to variant 0) against k_mmv6 (variant 3);
#   1. the tree's binary (GDN clusters on by default now): gate kernels 35b-a3b, 9b; gate kernels 27b with
#      MEMRA_MMVQ_TM2=1 (k_mmvq_tm2: 27b's Q4_K ffn_down, two K ranges a warp); gate model;
#   2. 27b q4_k_m: logits of 66 tokens (--all: a chunk of 64, then T = 2) cmp-equal under MEMRA_MMVQ_TM2=1, decode@0
#      A/B, two rounds;
#   3. 35b-a3b q4_k_m: logits cmp-equal under MEMRA_MOE_ROUTE1=1 (the route as its own launch), decode@0 A/B
#      against MEMRA_GDN_CLUSTER=0 and MEMRA_MOE_ROUTE1=1 (gated in part 1);
#   4. chain_lab with the two-level barrier and the spread prep sums ({2048, 16} is one tile: a phase is almost
#      only its barriers).
set -u
T0=$(date +%s); BUDGET=${BUDGET:-480}
left() { [ $(( $(date +%s) - T0 )) -lt $(( BUDGET - $1 )) ]; }
OUT=${OUT:-/tmp/next-run}; mkdir -p $OUT
bash bench/unpack.sh .bin .fix
B=.bin/memra
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
for S in "12288 4096" "17408 5120" "4096 8192" "5120 10240"; do
  echo "== $S"; timeout 60 .bin/mmvq_tm_lab $S q6_k; echo "rc=$?"
done 2>&1 | grep -v "^$" | tee $OUT/tm6.txt
for gm in 35b-a3b 9b; do
  timeout 40 $B gate kernels --model $gm --seed 198 >>$OUT/gk.log 2>&1; echo "gate kernels $gm rc=$?"
done
MEMRA_MMVQ_TM2=1 timeout 40 $B gate kernels --model 27b --seed 198 >>$OUT/gk.log 2>&1
echo "MMVQ_TM2=1 gate kernels 27b rc=$?"
MEMRA_MOE_ROUTE1=1 timeout 40 $B gate kernels --model 35b-a3b --seed 199 >>$OUT/gk.log 2>&1
echo "MOE_ROUTE1=1 gate kernels 35b-a3b rc=$?"
timeout 60 $B gate model --backend cuda --fixtures tests/data --fixtures .fix >$OUT/gm.log 2>&1; echo "gate model rc=$?"
grep -E "passed|FAIL" $OUT/gk.log $OUT/gm.log | head
TOK=$(python3 -c "import random; random.seed(7); print(','.join(str(random.randrange(1000, 150000)) for _ in range(66)))")
if left 150; then
  f=/tmp/ab-27b-q4_k_m.gguf
  $B mkmodel --preset 27b --type q4_k_m --vocab tests/data/tiny-dense.bf16.gguf -o $f >/dev/null 2>&1 || echo mkmodel failed
  for v in 0 1; do
    MEMRA_MMVQ_TM2=$v $B eval -m $f --backend cuda --ctx 256 --tokens $TOK --all -o /tmp/ev-$v.f32 2>>$OUT/ab.log
  done
  cmp /tmp/ev-0.f32 /tmp/ev-1.f32 && echo "27b eval 66 --all: MMVQ_TM2=1 logits cmp-equal to 0"
  rm -f /tmp/ev-*.f32
  BIN=$B MODELS=27b:q4_k_m ROUNDS=2 VARIANTS="- MEMRA_MMVQ_TM2=1" OUT=$OUT bash bench/env_ab.sh 2>&1 | tee $OUT/ab.txt
fi
echo "t=$(( $(date +%s) - T0 ))"
if left 110; then
  f=/tmp/ab-35b-a3b-q4_k_m.gguf
  $B mkmodel --preset 35b-a3b --type q4_k_m --vocab tests/data/tiny-dense.bf16.gguf -o $f >/dev/null 2>&1 || echo mkmodel failed
  for v in 0 1; do
    MEMRA_MOE_ROUTE1=$v $B eval -m $f --backend cuda --ctx 256 --tokens $TOK --all -o /tmp/ev-$v.f32 2>>$OUT/ab.log
  done
  cmp /tmp/ev-0.f32 /tmp/ev-1.f32 && echo "35b-a3b eval 66 --all: MOE_ROUTE1=1 logits cmp-equal to 0"
  rm -f /tmp/ev-*.f32
  BIN=$B MODELS=35b-a3b:q4_k_m ROUNDS=2 VARIANTS="- MEMRA_GDN_CLUSTER=0 MEMRA_MOE_ROUTE1=1" OUT=$OUT \
    bash bench/env_ab.sh 2>&1 | tee -a $OUT/ab.txt
fi
echo "t=$(( $(date +%s) - T0 ))"
run() { echo "== $*"; env "$@" timeout 40 .bin/chain_lab $S; echo "rc=$?"; }
for S in "2048 16" "2048 512" "4096 4096" "4096 12288"; do
  left 20 || break
  run CHAIN_NSUB=16
  case "$S" in "2048 16"|"4096 4096") run CHAIN_NSUB=1; run CHAIN_NSUB=16 CHAIN_PER_SM=1;; esac
done 2>&1 | grep -v "^$" | tee $OUT/chain.txt
echo "t=$(( $(date +%s) - T0 ))"
