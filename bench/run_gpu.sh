#!/bin/bash
# The device-machine run: build, exactness gates, then random full-size models
# made with `memra mkmodel` and timed with `memra bench`. Run from the repo
# root on the GPU machine (no network needed):
#
#   bash bench/run_gpu.sh
#
# Everything is teed under $OUT (default /tmp/run-gpu-out), at most 6 files so
# that all of them come back from the device tool:
#   build.log            the make output
#   gates.txt            `memra gate kernels` and `memra gate model --backend cuda`
#   gate-kernels-full.log the kernel gate's full per-case rows
#   bench.txt            mkmodel and bench logs, human tables
#   bench.csv            every bench measurement (one header)
#   result.md            command, date, commit, GPU, summary table and the CSV:
#                        copy it to bench/results/ (bench/README.md)
# A short table is printed last.
#
# Steps can be skipped or split across calls (one command has 10 minutes):
#   SKIP_BUILD=1         use the existing $BUILD/memra ($BUILD/memra.xz or .gz is unpacked first, and so
#                        are the .xz / .gz files of the FIXTURES folders)
#   SKIP_GATE=1          no gates at all;  SKIP_KERNELS=1 / SKIP_MODEL_GATE=1: one of them
#   MODELS="9b:q8_0 27b:q4_k_m"   PRESET:TYPE list (default: 9b:q8_0 9b:q4_k_m 27b:q4_k_m
#                        35b-a3b:q4_k_m); MODELS="" benchmarks nothing
#   BENCH_ARGS="..."     passed to memra bench (default: --prefill 512,8192 --depth 0,4096
#                        --decode-tokens 64 --reps 3)
#   KEEP_MODELS=1        keep /tmp/memra-bench-*.gguf (default: each is deleted after its bench)
#   TIME_BUDGET=560      seconds this script may use; a model that would start later than
#                        TIME_BUDGET - 150 s is skipped (and listed as skipped)
#   GATE_KERNEL_ARGS     default "--seed 1";  FIXTURES: folders for gate model (default: the
#                        ones of tests/data, shared/fixtures, ../shared/fixtures that exist)
#   BUILD=build          build folder; CUDA_ARCH=sm_90a
#   VOCAB=FILE           tokenizer GGUF for mkmodel (default: qwen3-vocab.gguf of the fixtures if
#                        present, else tests/data/tiny-dense.bf16.gguf, padded to the preset's vocab)
#   BACKEND=cuda         backend of gate model and bench (cpu: a dry run of this script without a GPU)
set -u -o pipefail
cd "$(dirname "$0")/.."
T0=$(date +%s)
OUT=${OUT:-/tmp/run-gpu-out}
BUILD=${BUILD:-build}
CUDA_ARCH=${CUDA_ARCH:-sm_90a}
MODELS=${MODELS-9b:q8_0 9b:q4_k_m 27b:q4_k_m 35b-a3b:q4_k_m}
BENCH_ARGS=${BENCH_ARGS:---prefill 512,8192 --depth 0,4096 --decode-tokens 64 --reps 3}
TIME_BUDGET=${TIME_BUDGET:-560}
BIN=$BUILD/memra
BACKEND=${BACKEND:-cuda}
mkdir -p "$OUT"
: >"$OUT/bench.txt"
elapsed() { echo $(($(date +%s) - T0)); }
left() { echo $((TIME_BUDGET - $(elapsed))); }
say() { echo "[run_gpu $(elapsed)s] $*" | tee -a "$OUT/bench.txt"; }

COMMIT=$(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)
DIRTY=$(git status --porcelain 2>/dev/null | wc -l)
GPU=$(nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv,noheader 2>/dev/null |
    head -1)
GPU=${GPU:-no nvidia-smi}
say "commit $COMMIT ($DIRTY changed files), GPU: $GPU"

status_build=skipped status_kernels=skipped status_model=skipped
# ---------------------------------------------------------------- build
if [ "${SKIP_BUILD:-0}" != 1 ]; then
    DEPS_ARG=; [ -d .deps ] && DEPS_ARG="DEPS=.deps"  # headers + static libs carried from here
    say "make -j16 CUDA_ARCH=$CUDA_ARCH BUILD=$BUILD $DEPS_ARG"
    if make -j16 CUDA_ARCH="$CUDA_ARCH" BUILD="$BUILD" $DEPS_ARG >"$OUT/build.log" 2>&1; then
        status_build=ok
    else
        status_build=FAIL
        tail -30 "$OUT/build.log"
        say "build failed; see build.log"
        exit 1
    fi
fi
# A binary or fixtures carried compressed (the device tool's 64 MiB carry limit: `xz` on the dev machine) are
# unpacked here: $BIN.xz or $BIN.gz, and the .xz / .gz files of the FIXTURES folders.
unpack() {
    local z
    for z in "$@"; do
        [ -f "$z" ] || continue
        case $z in
        *.xz) python3 -c 'import lzma, sys; open(sys.argv[1][:-3], "wb").write(lzma.open(sys.argv[1]).read())' "$z" &&
            rm -f "$z" ;;
        *.gz) gunzip -f "$z" ;;
        esac
    done
}
if [ ! -x "$BIN" ] && [ "${SKIP_BUILD:-0}" = 1 ]; then
    unpack "$BIN.xz" "$BIN.gz"
    [ -f "$BIN" ] && chmod +x "$BIN" && say "unpacked $BIN"
fi
for d in ${FIXTURES:-}; do [ -d "$d" ] && unpack "$d"/*.xz "$d"/*.gz; done
[ -x "$BIN" ] || { say "$BIN is missing"; exit 1; }

# ---------------------------------------------------------------- gates
: >>"$OUT/gates.txt"
if [ "${SKIP_GATE:-0}" != 1 ] && [ "${SKIP_KERNELS:-0}" != 1 ]; then
    say "memra gate kernels ${GATE_KERNEL_ARGS:---seed 1}"
    timeout $(($(left) > 60 ? $(left) - 30 : 30)) "$BIN" gate kernels ${GATE_KERNEL_ARGS:---seed 1} \
        --log "$OUT/gate-kernels-full.log" 2>&1 | tee -a "$OUT/gates.txt" | tail -5
    rc=${PIPESTATUS[0]}
    status_kernels=$([ "$rc" = 0 ] && echo ok || echo "FAIL($rc)")
    say "gate kernels: $status_kernels"
fi
if [ "${SKIP_GATE:-0}" != 1 ] && [ "${SKIP_MODEL_GATE:-0}" != 1 ]; then
    fx=()
    if [ -n "${FIXTURES:-}" ]; then
        for d in $FIXTURES; do fx+=(--fixtures "$d"); done
    else
        for d in tests/data shared/fixtures ../shared/fixtures; do [ -d "$d" ] && fx+=(--fixtures "$d"); done
    fi
    say "memra gate model --backend $BACKEND ${fx[*]}"
    timeout $(($(left) > 60 ? $(left) - 30 : 30)) "$BIN" gate model --backend "$BACKEND" "${fx[@]}" 2>&1 |
        tee -a "$OUT/gates.txt" | grep -E 'FAIL|checks' | head -20
    rc=${PIPESTATUS[0]}
    status_model=$([ "$rc" = 0 ] && echo ok || echo "FAIL($rc)")
    say "gate model: $status_model"
fi

# ---------------------------------------------------------------- models
# the tokenizer to copy (the vocabulary is padded to the preset's size, so the
# tensor shapes are the real ones whichever file gives it)
VOCAB=${VOCAB:-}
[ -n "$VOCAB" ] || for v in shared/fixtures/qwen3-vocab.gguf ../shared/fixtures/qwen3-vocab.gguf tests/data/tiny-dense.bf16.gguf; do
    [ -f "$v" ] && { VOCAB=$v; break; }
done
rm -f /tmp/memra-bench-*.gguf /tmp/memra-bench-*.gguf.tmp
header_done=0
[ -f "$OUT/bench.csv" ] && [ -s "$OUT/bench.csv" ] && header_done=1
skipped=()
bench_status=()
for spec in $MODELS; do
    preset=${spec%%:*} type=${spec##*:}
    if [ "$(left)" -lt 150 ]; then
        skipped+=("$spec")
        say "$spec: skipped (time budget: $(elapsed)s of $TIME_BUDGET used)"
        continue
    fi
    f=/tmp/memra-bench-$preset-$type.gguf
    gb=$("$BIN" mkmodel --preset "$preset" --type "$type" -o "$f" --vocab "$VOCAB" --dry-run 2>&1 |
        sed -nE 's/.*, ([0-9.]+) GB of tensor data.*/\1/p' | tail -1)
    avail=$(df -B1 --output=avail /tmp | tail -1)
    need=$(awk -v g="${gb:-0}" 'BEGIN { printf "%.0f", (g + 2) * 1e9 }')
    if [ -z "$gb" ] || [ "$avail" -lt "$need" ]; then
        bench_status+=("$spec:FAIL(disk or plan: ${gb:-?} GB needed, $avail bytes free)")
        say "$spec: cannot make it (${gb:-?} GB of tensors, $avail bytes free on /tmp)"
        continue
    fi
    say "$spec: mkmodel ($gb GB)"
    if ! timeout $(($(left) - 60)) "$BIN" mkmodel --preset "$preset" --type "$type" -o "$f" --vocab "$VOCAB" \
        >>"$OUT/bench.txt" 2>&1; then
        bench_status+=("$spec:FAIL(mkmodel)")
        say "$spec: mkmodel failed"
        rm -f "$f" "$f.tmp"
        continue
    fi
    say "$spec: memra bench $BENCH_ARGS"
    # CSV on stdout (header kept once), the human table on stderr
    timeout $(($(left) > 40 ? $(left) - 20 : 20)) "$BIN" bench -m "$f" --backend "$BACKEND" $BENCH_ARGS --csv \
        2>>"$OUT/bench.txt" | awk -v skip="$header_done" 'NR == 1 && skip == 1 { next } { print }' \
        >>"$OUT/bench.csv"
    rc=${PIPESTATUS[0]}
    header_done=1
    bench_status+=("$spec:$([ "$rc" = 0 ] && echo ok || echo "FAIL($rc)")")
    say "$spec: bench exit $rc"
    [ "${KEEP_MODELS:-0}" = 1 ] || rm -f "$f"
done

# ---------------------------------------------------------------- summary
summary() {
    echo "commit $COMMIT ($DIRTY changed files); $GPU"
    echo "build: $status_build   gate kernels: $status_kernels   gate model: $status_model"
    [ ${#bench_status[@]} -gt 0 ] && echo "bench: ${bench_status[*]}"
    [ ${#skipped[@]} -gt 0 ] && echo "skipped for time (run again with MODELS=\"${skipped[*]}\" SKIP_GATE=1): ${skipped[*]}"
    if [ -s "$OUT/bench.csv" ]; then
        printf '%-32s %-12s %12s %-6s %9s %8s\n' model measurement value unit GB/tok "%ceil"
        awk -F, 'NR > 1 && ($3 == "copy_bw" || $3 == "prefill" || $3 == "decode") {
            what = $3 == "prefill" ? "prefill " $8 : $3 == "decode" ? "decode@" $9 : "copy";
            gb = $3 == "decode" ? sprintf("%.2f", $11 / 1e9) : "";
            pct = $7 != "" ? sprintf("%.1f", 100 * $7) : "";
            name = $1; sub(/^memra-bench-/, "", name); sub(/\.gguf$/, "", name);
            printf "%-32s %-12s %12.1f %-6s %9s %8s\n", name, what, $4, $5, gb, pct }' "$OUT/bench.csv"
    fi
    echo "total $(elapsed)s"
}
{
    echo "# memra bench run $(date -u +%Y-%m-%dT%H:%MZ)"
    echo
    echo "- command: \`MODELS=\"$MODELS\" BENCH_ARGS=\"$BENCH_ARGS\" bash bench/run_gpu.sh\`" \
        "(SKIP_BUILD=${SKIP_BUILD:-0} SKIP_GATE=${SKIP_GATE:-0})"
    echo "- commit: $COMMIT ($DIRTY files changed from it)"
    echo "- device: $GPU"
    echo
    echo '```'
    summary
    echo '```'
    echo
    echo '## bench.csv'
    echo
    echo '```'
    [ -f "$OUT/bench.csv" ] && cat "$OUT/bench.csv"
    echo '```'
} >"$OUT/result.md"
echo
echo "================ run_gpu summary ================"
summary
bad=0
for s in "$status_build" "$status_kernels" "$status_model" "${bench_status[@]}"; do
    case $s in *FAIL*) bad=1 ;; esac
done
exit $bad
