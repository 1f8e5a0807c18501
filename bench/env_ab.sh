#!/bin/bash
# Decode A/B of environment switches on the device machine:
# each model made once with mkmodel, then VARIANTS (env assignments, "-" for
# none) interleaved over ROUNDS, `memra bench --prefill 16 --depth 0`.
#   BIN=.bin/memra MODELS="9b:q4_k_m 35b-a3b:q4_k_m" ROUNDS=2 bash bench/env_ab.sh
set -u -o pipefail
BIN=${BIN:-.bin/memra}
OUT=${OUT:-/tmp/env-ab}
MODELS=${MODELS:-9b:q4_k_m 35b-a3b:q4_k_m}
ROUNDS=${ROUNDS:-2}
DEPTHS=${DEPTHS:-0}
VARIANTS=${VARIANTS:--}
mkdir -p "$OUT"
for m in $MODELS; do
    p=${m%%:*} t=${m##*:} f=/tmp/ab-$p-$t.gguf
    [ -f "$f" ] || "$BIN" mkmodel --preset "$p" --type "$t" --vocab tests/data/tiny-dense.bf16.gguf -o "$f" \
        >>"$OUT/env-ab.log" 2>&1 || { echo "mkmodel $m failed"; exit 1; }
    for r in $(seq "$ROUNDS"); do
        for v in $VARIANTS; do
            e=; [ "$v" != - ] && e=${v//,/ }
            line=$(env $e "$BIN" bench -m "$f" --backend cuda --prefill 16 --depth "$DEPTHS" --decode-tokens 64 \
                --reps 3 2>&1 | tee -a "$OUT/env-ab.log" | grep '^decode' | tr -s ' ' | tr '\n' ';')
            echo "$m round $r [$v] $line" | tee -a "$OUT/env-ab.txt"
        done
    done
    rm -f "$f"
done
