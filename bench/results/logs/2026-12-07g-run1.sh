#!/bin/bash
# Session 35's call: three opt-in decode switches in one run (each a timing change, the same bits by
# construction), with a diagnostic bound beside them.
#  - MEMRA_MMVQ_FUSE=1 (mmvq.cuh mmvq_out_prep, matmul.cu): the T <= 2 swiglu launch makes ffn_down's planes in
#    its last blocks, and ffn_down launches no prep.
#  - MEMRA_MMVQ_PT=W (mmvq.cuh k_mmvq_tp, session 34, not run before): the T <= 2 TL = 1 int8 matvecs on a
#    capped grid of at most sms x max(1, W / ks) blocks that walk several tiles.
#  - MEMRA_DIAG_NOPREP=1 / 2 (WRONG RESULTS, timing only): no prep launched without a norm / at all: the most
#    fusing preps into their producers could save.
# Gates under the switches (gate kernels has swiglu->down, the chain the fusion changes, against the CPU and
# memcmp against down on a copy of mid), eval logits cmp (65 tokens --all: a chunk of 64, then a T = 1 step),
# then decode@0 in interleaved rounds.
#   BUDGET=540 OUT=$OUT bash bench/next_run_fuse.sh   (carry .bin .fix; .bin/memra this tree, stripped, xz'd)
set -u
T0=$(date +%s); BUDGET=${BUDGET:-540}
left() { [ $(( $(date +%s) - T0 )) -lt $(( BUDGET - $1 )) ]; }
bash bench/unpack.sh .bin .fix
B=.bin/memra
nvidia-smi --query-gpu=name --format=csv,noheader
f=/tmp/m.gguf
dec() { env "$@" $B bench -m $f --backend cuda --prefill 16 --depth 0 --decode-tokens 64 --reps 3 2>&1 |
  grep '^decode' | tr -s ' '; }
TOK=$(python3 -c "import random; random.seed(7)
print(','.join(str(random.randrange(1000, 150000)) for _ in range(65)))")
gk() { local m=$1 tag=$2; shift 2
  env "$@" timeout 90 $B gate kernels --model $m --seed 366 >$OUT/gk-$m-$tag.log 2>&1
  echo "$* gate kernels $m rc=$? $(grep -h 'passed' $OUT/gk-$m-$tag.log | tail -1)"
  grep -h "FAIL\|swiglu->down" $OUT/gk-$m-$tag.log | head -8; }
# one model: eval cmp of each switch in $2 against the default, then two rounds of decode@0 over $3
one() { local m=$1 cmps=$2 vars=$3
  $B mkmodel --preset $m --type q4_k_m --vocab tests/data/tiny-dense.bf16.gguf -o $f >/dev/null 2>&1 || echo mkmodel failed
  $B eval -m $f --backend cuda --ctx 256 --tokens $TOK --all -o /tmp/ev-0.f32 2>/dev/null
  for v in $cmps; do
    env $v $B eval -m $f --backend cuda --ctx 256 --tokens $TOK --all -o /tmp/ev-1.f32 2>/dev/null
    cmp /tmp/ev-0.f32 /tmp/ev-1.f32 && echo "$m eval 65 --all: $v cmp-equal to the default"
  done
  for r in 1 2; do
    left 40 || break
    for v in $vars; do echo "$m d0 r$r [$v] $(dec $v)"; done
  done
  rm -f $f /tmp/ev-*.f32; }
gk 9b fuse MEMRA_MMVQ_FUSE=1
left 60 && one 9b "MEMRA_MMVQ_FUSE=1 MEMRA_MMVQ_PT=16 MEMRA_MMVQ_PT=8" \
  "MEMRA_NONE=0 MEMRA_MMVQ_FUSE=1 MEMRA_DIAG_NOPREP=1 MEMRA_DIAG_NOPREP=2 MEMRA_MMVQ_PT=16 MEMRA_MMVQ_PT=8"
left 90 && one 27b "MEMRA_MMVQ_FUSE=1" "MEMRA_NONE=0 MEMRA_MMVQ_FUSE=1 MEMRA_DIAG_NOPREP=1"
left 30 && gk 27b fuse MEMRA_MMVQ_FUSE=1
left 70 && { MEMRA_MMVQ_FUSE=1 timeout 60 $B gate model --backend cuda --fixtures tests/data --fixtures .fix \
  >$OUT/gm.log 2>&1; echo "FUSE=1 gate model rc=$? $(tail -1 $OUT/gm.log)"; }
left 90 && one 35b-a3b "MEMRA_MMVQ_PT=8" "MEMRA_NONE=0 MEMRA_DIAG_NOPREP=1 MEMRA_MMVQ_PT=16 MEMRA_MMVQ_PT=8"
left 30 && gk 9b pt8 MEMRA_MMVQ_PT=8
cat $OUT/gk-*.log | gzip >$OUT/gk.log.gz; rm -f $OUT/gk-*.log
echo "t=$(( $(date +%s) - T0 ))"
