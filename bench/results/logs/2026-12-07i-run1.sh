#!/bin/bash
# Session 37's device call (~4 min on an H100): session 36's unrun bench/next_run_px.sh plus the MoE int8
# kernels on mmvq_sb_lean.
#  .bin/memra0: 7f1ab6a (the kernels of record); .bin/memra: the MoE staging on mmvq_sb_lean (this tree).
#  1. sb_lab (V5, V6: the Q6_K chain).
#  2. gate kernels 9b and 35b-a3b with .bin/memra (the default k_mmvq_tm instances were rebuilt with the PX
#     template; 35b-a3b gates the lean MoE staging), then MEMRA_MMVQ_PX=1 on both.
#  3. per file (9b, 35b-a3b q4_k_m): logits of 65 tokens (--all) of memra0, memra and memra PX=1 (PX must be
#     cmp-equal to memra; the MoE change moves 35b-a3b's bits by ~1e-6), then decode@0 in interleaved rounds.
#  4. mmvq_tm_lab RINGX (k_tx variants 21, 22) on the decode shapes.
#   Build here:  see next_run_px.sh; mv the binary of record to .bin/memra0.xz first.
#   Device:      BUDGET=420 OUT=$OUT bash bench/next_run_s37.sh   (carry .bin)
set -u
T0=$(date +%s); BUDGET=${BUDGET:-420}
left() { [ $(( $(date +%s) - T0 )) -lt $(( BUDGET - $1 )) ]; }
bash bench/unpack.sh .bin
B=.bin/memra
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
timeout 60 .bin/sb_lab >$OUT/sb_lab.txt 2>&1; echo "sb_lab rc=$?"; tail -12 $OUT/sb_lab.txt
for m in 9b 35b-a3b; do
  for px in 0 1; do
    MEMRA_MMVQ_PX=$px timeout 120 $B gate kernels --model $m --seed 370 >$OUT/gk-$m-$px.log 2>&1
    echo "gate kernels $m PX=$px rc=$? $(grep -h 'passed' $OUT/gk-$m-$px.log | tail -1)"
    grep -h FAIL $OUT/gk-$m-$px.log | head -5
  done
done
cat $OUT/gk-*.log | gzip >$OUT/gk.log.gz; rm -f $OUT/gk-*.log
f=/tmp/m.gguf
dec() { local b=$1; shift; env "$@" $b bench -m $f --backend cuda --prefill 16 --depth 0 --decode-tokens 64 \
  --reps 3 2>&1 | grep '^decode' | tr -s ' '; }
TOK=$(python3 -c "import random; random.seed(7)
print(','.join(str(random.randrange(1000, 150000)) for _ in range(65)))")
for m in 9b 35b-a3b; do
  left 120 || break
  $B mkmodel --preset $m --type q4_k_m --vocab tests/data/tiny-dense.bf16.gguf -o $f >/dev/null 2>&1 ||
    echo mkmodel failed
  .bin/memra0 eval -m $f --backend cuda --ctx 256 --tokens $TOK --all -o /tmp/ev-r.f32 2>/dev/null
  $B eval -m $f --backend cuda --ctx 256 --tokens $TOK --all -o /tmp/ev-0.f32 2>/dev/null
  MEMRA_MMVQ_PX=1 $B eval -m $f --backend cuda --ctx 256 --tokens $TOK --all -o /tmp/ev-1.f32 2>/dev/null
  cmp /tmp/ev-0.f32 /tmp/ev-1.f32 && echo "$m eval 65 --all: PX=1 cmp-equal to the default"
  python3 - <<'PY'
import array
a = array.array('f', open('/tmp/ev-r.f32', 'rb').read()); b = array.array('f', open('/tmp/ev-0.f32', 'rb').read())
d = max(abs(x - y) for x, y in zip(a, b)) if len(a) == len(b) else -1
print(f"memra0 vs memra logits: n={len(a)} max|diff|={d:.3g} max|logit|={max(abs(x) for x in a):.3g}")
PY
  for r in 1 2; do
    left 40 || break
    echo "$m d0 r$r [memra0] $(dec .bin/memra0 MEMRA_NONE=0)"
    echo "$m d0 r$r [memra] $(dec $B MEMRA_NONE=0)"
    echo "$m d0 r$r [memra PX=1] $(dec $B MEMRA_MMVQ_PX=1)"
  done
  rm -f $f /tmp/ev-*.f32
done
for sh in "4096 12288" "12288 4096" "4096 4096" "5120 17408"; do
  left 40 || break
  echo "== $sh"; RINGX=1 timeout 60 .bin/mmvq_tm_lab $sh >/tmp/lab.txt 2>&1
  echo "rc=$?"; grep -v "^k_sk" /tmp/lab.txt
done
echo "t=$(( $(date +%s) - T0 ))"
