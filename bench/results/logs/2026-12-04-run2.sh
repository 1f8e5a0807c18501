#!/bin/bash
# run 2: gates on the new tree, attention/router bit checks, decode A/B, profiles
set -u
(cd .fix && gunzip -qf *.gz); gunzip -f .bin/memra.gz
B=.bin/memra
echo "== gate kernels --seed 150"
$B gate kernels --seed 150 > $OUT/gk.log 2>&1; echo rc=$?
grep -E "passed|attention|router" $OUT/gk.log | tail -40
echo "== gate kernels --model 27b --seed 150, MEMRA_ATT_DEC=0"
MEMRA_ATT_DEC=0 $B gate kernels --model 27b --seed 150 > $OUT/gk27-dec0.log 2>&1
$B gate kernels --model 27b --seed 150 > $OUT/gk27.log 2>&1
grep -E "attention" $OUT/gk27-dec0.log > /tmp/a0; grep -E "attention" $OUT/gk27.log > /tmp/a1
diff /tmp/a0 /tmp/a1 && echo "attention rows identical with MEMRA_ATT_DEC=0 and 1"; cat /tmp/a1
echo "== gate model"
$B gate model --backend cuda --fixtures tests/data --fixtures .fix > $OUT/gm.log 2>&1; echo rc=$?; tail -3 $OUT/gm.log
echo "== A/B"
MODELS="35b-a3b:q4_k_m 9b:q4_k_m" VARIANTS="MEMRA_ATT_DEC=0,MEMRA_RMV=0 - MEMRA_RMV=0" ROUNDS=2 DEPTHS=0,4096 bash bench/env_ab.sh
echo "== profiles"; sed -i "s/MEMRA_PF=0 //" .bin/prof.sh; MODELS="35b-a3b:q4_k_m" bash .bin/prof.sh 2>&1 | head -24
