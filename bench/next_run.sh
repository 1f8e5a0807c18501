#!/bin/bash
# Device run for the three changes on branch wip/next, none of them run on a
# GPU yet (written in session 18, which had no device):
#   - tile-major Q4_K weights (common.cuh; k_mmvq_tm in mmvq.cuh), off with
#     MEMRA_TILED=0;
#   - k_mmv6b, the Q6_K head by bulk copy (mmv6.cuh), off with MEMRA_MMV6B=0
#     (configurations: MEMRA_MMV6B_G, MEMRA_MMV6B_DG);
#   - Q6_K on the wgmma prefill GEMM (gemm.cu), off with MEMRA_GEMM_Q6=0.
# All three switches off is main's kernels (4318634).
#
# On the GPU machine from the repo root, with the binary in .bin (memra or
# memra.xz) and the fixtures in .fix (xz or not), one part per device call:
#
#   PART=1 bash bench/next_run.sh   # gates                         ~6 min
#   PART=2 bash bench/next_run.sh   # logits cmp, prefill A/B       ~6 min
#   PART=3 bash bench/next_run.sh   # decode A/B, profile           ~7 min
#
# 1. memra gate kernels --seed 153 (all models), then the 9b rows under each
#    switch that sends a tile-major weight to another kernel (MEMRA_MMVQ_TL=1
#    / 2, MEMRA_MMVQ=0, MEMRA_MMV=0, MEMRA_MMVG=0, MEMRA_GEMM_WG=0) and under
#    two other k_mmv6b configurations, then memra gate model.
# 2. .bin/gemm_lab (if there) on 27b's and 9b's Q6_K shapes and one Q4_K
#    shape; memra eval of 9b and 27b q4_k_m with MEMRA_TILED=0 and with the
#    default, logits compared with cmp: 70 tokens --all (chunks of 64 and 6)
#    and 513 tokens, last row (a 512-token chunk, then T = 1). Then prefill
#    512 on 27b and 9b q4_k_m, MEMRA_GEMM_Q6=0 against the default, two
#    interleaved rounds.
# 3. Decode at depth 0 on 9b, 27b and 35b-a3b q4_k_m (bench/env_ab.sh):
#    main's kernels, each change alone off, the default; two rounds. Then a
#    --profile decode step of 9b with and without k_mmv6b.
#
# Logs under $OUT (default /tmp/next-run); a short table last.
set -u -o pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/next-run}
PART=${PART:-1}
L=/tmp/next-logits
mkdir -p "$OUT" "$L"
# xz-compressed binaries and fixtures (the carry limit is 64 MiB), by python's lzma (no xz needed)
python3 -c "
import lzma, glob, os
for z in glob.glob('.fix/*.xz') + glob.glob('.bin/*.xz'):
    open(z[:-3], 'wb').write(lzma.open(z).read()); os.remove(z)
"
[ -f .bin/memra ] && chmod +x .bin/memra
B=${BIN:-.bin/memra}
VOCAB=tests/data/tiny-dense.bf16.gguf
T0=$(date +%s)
say() { echo "[next_run $PART $(($(date +%s) - T0))s] $*" | tee -a "$OUT/summary.txt"; }
[ -x "$B" ] || { say "$B is missing"; exit 1; }
model() { # PRESET TYPE -> the file (env_ab.sh's names: it reuses them)
    local f=/tmp/ab-$1-$2.gguf
    [ -f "$f" ] || "$B" mkmodel --preset "$1" --type "$2" --vocab "$VOCAB" -o "$f" >>"$OUT/mkmodel.log" 2>&1 ||
        { say "mkmodel $1:$2 failed"; return 1; }
    echo "$f"
}

if [ "$PART" = 1 ]; then
    say "memra gate kernels --seed 153"
    timeout 300 "$B" gate kernels --seed 153 --log "$OUT/gk-full.log" >"$OUT/gk.log" 2>&1
    say "rc=$? $(grep -E "passed" "$OUT/gk.log" | tail -1)"
    grep -E " FAIL |BATCH-VARIANT" "$OUT/gk.log" | head -20 | tee -a "$OUT/summary.txt"
    grep -E "output\{|q6_k.*T>=16|Q6_K.* 37 | Q6_K.* 64 " "$OUT/gk.log" | head -24 >"$OUT/gk-q6.txt"
    for e in MEMRA_MMVQ_TL=1 MEMRA_MMVQ_TL=2 MEMRA_MMVQ=0 MEMRA_MMV=0 MEMRA_MMVG=0 MEMRA_GEMM_WG=0 \
        MEMRA_MMV6B_G=1,MEMRA_MMV6B_DG=2 MEMRA_MMV6B_G=2,MEMRA_MMV6B_DG=1; do
        timeout 90 env ${e//,/ } "$B" gate kernels --model 9b --seed 153 >"$OUT/gk-$e.log" 2>&1
        say "$e gate kernels --model 9b: rc=$? $(grep -E "passed" "$OUT/gk-$e.log" | tail -1)"
        grep -E " FAIL " "$OUT/gk-$e.log" | head -5 | tee -a "$OUT/summary.txt"
    done
    say "memra gate model --backend cuda --fixtures tests/data --fixtures .fix"
    timeout 120 "$B" gate model --backend cuda --fixtures tests/data --fixtures .fix >"$OUT/gm.log" 2>&1
    say "rc=$? $(tail -1 "$OUT/gm.log")"
    grep -E "FAIL" "$OUT/gm.log" | head -10 | tee -a "$OUT/summary.txt"
fi

if [ "$PART" = 2 ]; then
    if [ -f .bin/gemm_lab ]; then # BUILD=build-lab REBUILD=1 bash bench/kernels/lab.sh gemm_lab, stripped into .bin
        chmod +x .bin/gemm_lab
        for a in "512 17408 5120 q6_k" "512 12288 4096 q6_k" "512 5120 17408 q6_k" "512 17408 5120 q4_k"; do
            timeout 60 .bin/gemm_lab $a >"$OUT/gemm-lab-${a// /-}.txt" 2>&1
            say "gemm_lab $a: rc=$? $(grep -E "vs CPU|TFLOP" "$OUT/gemm-lab-${a// /-}.txt" | tr -s ' ' | tr '\n' ';')"
        done
    fi
    F9=$(model 9b q4_k_m) || exit 1
    F27=$(model 27b q4_k_m) || exit 1
    TOK70=$(seq -s, 101 170)
    TOK513=$(seq -s, 1001 1513)
    eval_run() { # FILE TILED TOKENS OUT [--all]
        MEMRA_TILED=$2 timeout 120 "$B" eval -m "$1" --backend cuda --ctx 1024 --tokens "$3" -o "$4" ${5:-} \
            >>"$OUT/eval.log" 2>&1
    }
    for m in 9b:$F9 27b:$F27; do
        n=${m%%:*} f=${m#*:}
        for v in 0 1; do
            eval_run "$f" $v "$TOK70" "$L/$n-all-$v.f32" --all || say "$n: eval 70 MEMRA_TILED=$v failed"
            eval_run "$f" $v "$TOK513" "$L/$n-last-$v.f32" || say "$n: eval 513 MEMRA_TILED=$v failed"
        done
        for k in all last; do
            if cmp -s "$L/$n-$k-0.f32" "$L/$n-$k-1.f32"; then
                say "$n $k: logits identical, MEMRA_TILED=0 and 1 ($(stat -c %s "$L/$n-$k-1.f32") bytes, cmp)"
            else
                say "$n $k: logits DIFFER between MEMRA_TILED=0 and 1"
            fi
        done
    done
    rm -f "$L"/*.f32
    for r in 1 2; do
        for m in 27b:$F27 9b:$F9; do
            n=${m%%:*} f=${m#*:}
            for v in MEMRA_GEMM_Q6=0 -; do
                e=; [ "$v" != - ] && e=$v
                line=$(env $e "$B" bench -m "$f" --backend cuda --prefill 512 --depth 0 --decode-tokens 4 --reps 3 \
                    2>&1 | tee -a "$OUT/prefill.log" | grep -E "^prefill" | tr -s ' ')
                say "prefill $n q4_k_m round $r [$v] $line"
            done
        done
    done
    MEMRA_GEMM_Q6=0 "$B" bench -m "$F27" --backend cuda --prefill 512 --depth 0 --decode-tokens 2 --reps 1 \
        --profile >"$OUT/prof-27b-prefill-q6off.txt" 2>&1
    "$B" bench -m "$F27" --backend cuda --prefill 512 --depth 0 --decode-tokens 2 --reps 1 --profile \
        >"$OUT/prof-27b-prefill.txt" 2>&1
    rm -f "$F9" "$F27"
fi

if [ "$PART" = 3 ]; then
    F9=$(model 9b q4_k_m) || exit 1
    for v in MEMRA_MMV6B=0 -; do
        e=; [ "$v" != - ] && e=$v
        env $e "$B" bench -m "$F9" --backend cuda --prefill 16 --depth 0 --decode-tokens 16 --reps 1 --profile \
            >"$OUT/prof-9b-$v.txt" 2>&1
        say "9b profile [$v]: $(grep -E "^output " "$OUT/prof-9b-$v.txt" | head -1 | tr -s ' ')"
    done
    # env_ab.sh reuses /tmp/ab-9b-q4_k_m.gguf and deletes each model after its rounds
    OUT=$OUT MODELS="9b:q4_k_m 35b-a3b:q4_k_m 27b:q4_k_m" ROUNDS=2 DEPTHS=0 BIN=$B \
        VARIANTS="MEMRA_TILED=0,MEMRA_MMV6B=0 MEMRA_TILED=0 MEMRA_MMV6B=0 -" bash bench/env_ab.sh
    cat "$OUT/env-ab.txt" >>"$OUT/summary.txt"
fi
say "done; logs in $OUT"
echo "==== summary"
cat "$OUT/summary.txt"
