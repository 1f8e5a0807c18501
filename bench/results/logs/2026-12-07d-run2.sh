#!/bin/bash
# Session 32's second call: k_att_dec with a split's V rows copied into shared memory (cp.async) and the fold
# done by each (token, kv head)'s last block (no k_att_combine launch), gated and timed against the tree
# before it (.bin/memra-base: the same build of HEAD without the change).
#   BUDGET=300 OUT=$OUT bash bench/next_run_att.sh   (carry .bin .fix; .bin/memra this tree, memra-base HEAD)
set -u
T0=$(date +%s); BUDGET=${BUDGET:-300}
left() { [ $(( $(date +%s) - T0 )) -lt $(( BUDGET - $1 )) ]; }
bash bench/unpack.sh .bin .fix
B=.bin/memra; A=.bin/memra-base
nvidia-smi --query-gpu=name --format=csv,noheader
for m in 9b 35b-a3b 27b; do
  timeout 60 $B gate kernels --model $m --seed 321 >>$OUT/gk.log 2>&1
  echo "gate kernels $m rc=$? $(grep -h 'passed' $OUT/gk.log | tail -1)"
done
MEMRA_ATT_FOLD=0 timeout 60 $B gate kernels --model 9b --seed 322 >>$OUT/gk.log 2>&1
echo "MEMRA_ATT_FOLD=0 gate kernels 9b rc=$? $(grep -h 'passed' $OUT/gk.log | tail -1)"
grep -h FAIL $OUT/gk.log | head
grep -hE "^ *attention" $OUT/gk.log | head -12
timeout 60 $B gate model --backend cuda --fixtures tests/data --fixtures .fix >$OUT/gm.log 2>&1
echo "gate model rc=$? $(tail -1 $OUT/gm.log)"
f=/tmp/m.gguf
# the last 15 of 1295 tokens run k_att_dec (T = 15 < 16) at positions 1280..1294 (21 splits each)
TOK=$(python3 -c "import random; random.seed(7)
print(','.join(str(random.randrange(1000, 150000)) for _ in range(1295)))")
for spec in "9b 0 4096" "35b-a3b 0 4096"; do
  set -- $spec
  left 60 || break
  $B mkmodel --preset $1 --type q4_k_m --vocab tests/data/tiny-dense.bf16.gguf -o $f >/dev/null 2>&1 || echo mkmodel failed
  $A eval -m $f --backend cuda --ctx 1400 --tokens $TOK --all -o /tmp/ev-a.f32 2>/dev/null
  $B eval -m $f --backend cuda --ctx 1400 --tokens $TOK --all -o /tmp/ev-b.f32 2>/dev/null
  cmp /tmp/ev-a.f32 /tmp/ev-b.f32 && echo "$1 eval 1295 --all: logits cmp-equal to the base ($(stat -c %s /tmp/ev-b.f32) bytes)"
  for d in $2 $3; do
    for r in 1 2; do
      for v in base new; do
        X=$B; [ $v = base ] && X=$A
        echo "$1 d$d r$r [$v] $($X bench -m $f --backend cuda --prefill 16 --depth $d --decode-tokens 64 --reps 3 2>&1 |
          grep '^decode' | tr -s ' ')"
      done
    done
  done
  rm -f $f /tmp/ev-*.f32
done
gzip -f $OUT/gk.log
echo "t=$(( $(date +%s) - T0 ))"
