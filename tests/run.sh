#!/usr/bin/env bash
# Runs every test program of each build folder given, then the Python
# cross-checks (tests/py/test_*.py), and prints the total last as
# "N passed, N failed". Each program prints "NAME: N passed, N failed"; a
# program that crashes or prints no such line counts as one failure.
set -u
cd "$(dirname "$0")/.."
pass=0 fail=0
run_one() { # label, command...
    local label=$1; shift
    local out rc line
    out=$("$@" 2>&1); rc=$?
    line=$(printf '%s\n' "$out" | grep -E '^[A-Za-z0-9_./-]+: [0-9]+ passed, [0-9]+ failed' | tail -n 1)
    if [ -z "$line" ]; then
        printf '%s\n' "$out" | tail -n 30
        echo "$label: crashed or printed no result (exit $rc)"
        fail=$((fail + 1))
        return
    fi
    local p f
    p=$(sed -E 's/.*: ([0-9]+) passed, ([0-9]+) failed.*/\1/' <<<"$line")
    f=$(sed -E 's/.*: ([0-9]+) passed, ([0-9]+) failed.*/\2/' <<<"$line")
    if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then f=1; fi
    [ "$f" -ne 0 ] && printf '%s\n' "$out" | grep -E '^(FAIL|ERROR)' | head -n 40
    echo "[$label] $line"
    pass=$((pass + p)); fail=$((fail + f))
}
for b in "$@"; do
    for t in "$b"/tests/test_*; do
        [ -x "$t" ] || continue
        run_one "$b" "$t"
    done
done
for py in tests/py/test_*.py; do
    [ -f "$py" ] || continue
    run_one py python3 "$py"
done
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
