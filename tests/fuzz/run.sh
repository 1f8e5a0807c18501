#!/usr/bin/env bash
# Runs the GGUF fuzzer for a bounded time and fails on any crash.
#   tests/fuzz/run.sh FUZZ_BIN SECONDS
# Seeds: tests/fuzz/corpus/ (small valid and damaged files, made by
# make_corpus.py) plus the first 64 KB of every fixture .gguf when the fixture
# folder exists ($MEMRA_FIXTURES or ../shared/fixtures from the repo root).
# The run works on a copy, so the checked-in corpus is never modified; a
# crashing input is left in build-fuzz/ and named in the output.
set -u
bin=${1:?usage: run.sh FUZZ_BIN SECONDS}
secs=${2:-60}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
fixtures=${MEMRA_FIXTURES:-$root/../shared/fixtures}
out=$(dirname "$bin")
work=$(mktemp -d "${TMPDIR:-/tmp}/memra-fuzz.XXXXXX")
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/corpus"
cp "$here"/corpus/* "$work/corpus/" 2>/dev/null || true
n_fix=0
if [ -d "$fixtures" ]; then
    for f in "$fixtures"/*.gguf; do
        [ -f "$f" ] || continue
        head -c 65536 "$f" >"$work/corpus/fixture-$(basename "$f")"
        n_fix=$((n_fix + 1))
    done
fi
echo "fuzz: $(ls "$work/corpus" | wc -l) seeds ($n_fix from fixtures), ${secs}s"
# -max_len 65536: the seeds' size; -rss_limit_mb: the reader's allocations
# are bounded by the input size, so a blow-up is a bug.
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}
"$bin" -max_total_time="$secs" -max_len=65536 -timeout=10 -rss_limit_mb=2048 \
    -dict="$here/gguf.dict" -artifact_prefix="$out/" -print_final_stats=1 \
    "$work/corpus" >"$work/log" 2>&1
rc=$?
tail -n 25 "$work/log"
if [ $rc -ne 0 ] || grep -qE 'ERROR: (AddressSanitizer|UndefinedBehaviorSanitizer|libFuzzer)|runtime error|SUMMARY:' "$work/log"; then
    echo "fuzz: FAILED (exit $rc); crashing input:" $(ls "$out"/crash-* "$out"/timeout-* "$out"/oom-* 2>/dev/null)
    exit 1
fi
echo "fuzz: ok"
