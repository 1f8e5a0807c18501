#!/bin/bash
# Run in session 24 as 2026-12-06e run 1 (RUN4=0; written in session 23): MEMRA_GEMM_TMA6=2, k_gemm_wg's Q6_K TMA variant
# with one raw-weight ring of three slots shared by its two producers (gemm.cu, XT = 2: step k's raw bytes are
# copied by the producer that converted step k - 3 and arrive on the slot's mbarrier), against the default
# (XT = 1: one slot a producer, so each raw copy waits in series with its conversion). Same arithmetic, so the
# same bits. One call on the GPU machine from the repo root, ~3 min; .bin/memra and .bin/gemm_lab (xz) built on
# the dev machine, fixtures xz'd in .fix:
#   1. gemm_lab on 27b's Q6_K shapes: XT 1 (dump) and XT 2 (held to it bit for bit, timed);
#   2. MEMRA_GEMM_TMA6=2: gate kernels 27b, 9b, 35b-a3b, 0.8b; gate model;
#   3. 27b and 35b-a3b q4_k_m: logits cmp TMA6 1 vs 2, prefill 512 A/B, two rounds;
#   4. ncu sections of the Q4_K TMA variant in gemm_lab (what binds it now);
#   5. then bench/results/logs/2026-12-06d-run4.sh (the final tree's gates, four files, ncu of a 27b prefill).
# If 1 holds the bits and 3 gains, make 2 the Q6_K default (wg_xt) and record the numbers.
set -u
T0=$(date +%s)
OUT=${OUT:-/tmp/next-tma6}; mkdir -p $OUT
python3 -c "
import lzma,glob,os
for z in glob.glob('.fix/*.xz')+glob.glob('.bin/*.xz'):
    open(z[:-3],'wb').write(lzma.open(z).read()); os.remove(z)
"; chmod +x .bin/*
B=.bin/memra
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
for s in "17408 5120 4" "5120 10240 2"; do
  set -- $s
  LAB_KS=$3 LAB_XT=1 LAB_DUMP=/tmp/d.bin .bin/gemm_lab 512 $1 $2 q6_k >> $OUT/lab.txt 2>&1; echo "rc=$?" >> $OUT/lab.txt
  LAB_KS=$3 LAB_XT=2 LAB_CMP=/tmp/d.bin .bin/gemm_lab 512 $1 $2 q6_k >> $OUT/lab.txt 2>&1; echo "rc=$?" >> $OUT/lab.txt
done
grep -E "gemm_lab:|k_gemm_wg  |against|FAIL|DIFF|rc=[1-9]|rror" $OUT/lab.txt
for gm in 27b 9b 35b-a3b 0.8b; do
  MEMRA_GEMM_TMA6=2 timeout 60 $B gate kernels --model $gm --seed 191 >>$OUT/gk.log 2>&1
  echo "TMA6=2 gate kernels $gm rc=$?"
done
grep -E "passed|FAIL" $OUT/gk.log | head -20
MEMRA_GEMM_TMA6=2 timeout 60 $B gate model --backend cuda --fixtures tests/data --fixtures .fix >$OUT/gm.log 2>&1
echo "TMA6=2 gate model rc=$?"; grep -E "FAIL|checks" $OUT/gm.log | head
TOK=$(python3 -c "import random; random.seed(7); print(','.join(str(random.randrange(1000, 150000)) for _ in range(66)))")
for m in 27b:q4_k_m 35b-a3b:q4_k_m; do
  p=${m%%:*} t=${m##*:} f=/tmp/ab-$p-$t.gguf
  $B mkmodel --preset $p --type $t --vocab tests/data/tiny-dense.bf16.gguf -o $f >/dev/null 2>&1 || echo mkmodel failed
  for v in 1 2; do
    MEMRA_GEMM_TMA6=$v $B eval -m $f --backend cuda --ctx 256 --tokens $TOK --all -o /tmp/ev-$v.f32 2>>$OUT/ab.log
  done
  cmp /tmp/ev-1.f32 /tmp/ev-2.f32 && echo "$m eval 66 --all: TMA6=2 logits cmp-equal to TMA6=1"
  for r in 1 2; do for v in 1 2; do
    line=$(MEMRA_GEMM_TMA6=$v $B bench -m $f --backend cuda --prefill 512 --depth 0 --decode-tokens 1 --reps 3 2>&1 |
      tee -a $OUT/ab.log | grep '^prefill' | tr -s ' ')
    echo "$m r$r TMA6=$v: $line"; done; done
  rm -f $f /tmp/ev-*.f32
  echo "t=$(( $(date +%s) - T0 ))"
done 2>&1 | tee $OUT/ab.txt
# Q4_K's raw ring depth (optional: gemm_lab variants built on the dev machine with -DWS_RQ4=n as .bin/gemm_lab_rN,
# the same nvcc line as bench/kernels/lab.sh plus the define; the default is 4), held to the default's bits
for v in .bin/gemm_lab_r[0-9]; do
  [ -x "$v" ] || continue
  LAB_XT=1 LAB_DUMP=/tmp/d4.bin .bin/gemm_lab 512 5120 17408 q4_k > /dev/null 2>&1
  LAB_XT=1 LAB_CMP=/tmp/d4.bin $v 512 5120 17408 q4_k 2>&1 | sed "s|^|$v: |" | grep -E "k_gemm_wg  |against|FAIL"
done
# where the TMA variant's time goes now (the conversion, or the consumers' scaling): ncu sections of Q4_K XT = 1
LAB_XT=1 timeout 120 ncu --kernel-name-base mangled -k regex:k_gemm_wgILi12ELb0ELi1E -c 1 --section SpeedOfLight \
  --section WarpStateStats --section SchedulerStats .bin/gemm_lab 512 5120 17408 q4_k >$OUT/ncu-q4-xt.txt 2>&1
echo "ncu q4 xt rc=$?"
grep -iE "Duration|Issue Slots|Eligible|Stall|stall|Warp Cycles" $OUT/ncu-q4-xt.txt | head -30
[ "${RUN4:-1}" = 1 ] && OUT=$OUT/run4 bash bench/results/logs/2026-12-06d-run4.sh 2>&1 | tail -40
# at most 8 files come back from the device tool: one archive
cd $OUT && tar czf /tmp/next-tma6.tgz . && rm -rf ./* && mv /tmp/next-tma6.tgz .
