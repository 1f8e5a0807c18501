#!/usr/bin/env python3
"""What each op costs inside the captured decode step: a timing ablation.

    python3 bench/ablate.py -m MODEL.gguf [--memra .bin/memra] [--backend cuda] [--ops "gdn,attention"]
                            [--depth N] [--markdown]

Runs `memra bench --profile` once for the step's op names and counts, then the decode timing once with
MEMRA_SKIP_OPS=<op> for each op (forward.c leaves that op out, so the logits are wrong; only the time is
used), with the base timed first and last. The time a step saves without an op is what that op costs in it,
launches and the waits around it included, which the profile (events around each op of an uncaptured step)
cannot show. Prints one row per op: count, ms/token without it, ms saved a step, share of the step, us per op
(--markdown: as a markdown table). --depth N decodes after N tokens of context (default 0).
bench/results/2026-12-07d-h100.md, section 5, is such a table.
"""
import argparse
import os
import re
import subprocess
import sys

SKIP_ALWAYS = {"embed", "sync", "output_norm"}  # ops whose absence breaks the step or costs nothing measurable


def bench(memra, model, backend, depth, skip=None, profile=False):
    cmd = [memra, "bench", "-m", model, "--backend", backend, "--prefill", "16", "--depth", str(depth),
           "--decode-tokens", "64", "--reps", "3", "--copy-mib", "256"]
    if profile:
        cmd.append("--profile")
    env = dict(os.environ)
    env.pop("MEMRA_SKIP_OPS", None)
    if skip:
        env["MEMRA_SKIP_OPS"] = skip
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    out = r.stdout + r.stderr
    m = re.search(r"^decode\s+depth\s+%d\s+\S+\s+tok/s\s+([0-9.]+)\s+ms/tok" % depth, out, re.M)
    if not m:
        sys.exit(f"ablate: no decode line from {' '.join(cmd)} (MEMRA_SKIP_OPS={skip}):\n{out[-800:]}")
    return float(m.group(1)), out


def profile_ops(out):
    """(name, count) of the decode profile's rows, in its order."""
    ops, on = [], False
    for line in out.splitlines():
        if line.startswith("decode profile"):
            on = True
            continue
        if not on or line.startswith("profile:") or line.startswith("op "):
            continue
        f = line.split()
        if len(f) < 5 or not f[-1].endswith("%"):
            break
        ops.append((" ".join(f[:-4]), int(f[-4])))
    return ops


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("-m", "--model", required=True)
    ap.add_argument("--memra", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "build", "memra"))
    ap.add_argument("--backend", default="cuda")
    ap.add_argument("--ops", help="comma-separated op names (default: every op of the decode profile)")
    ap.add_argument("--depth", type=int, default=0, help="context before the decoded tokens (default 0)")
    ap.add_argument("--markdown", action="store_true", help="the table in markdown")
    a = ap.parse_args()
    counts = {}
    if a.backend == "cpu":  # no op timeline: the names from --ops, no counts
        base0, _ = bench(a.memra, a.model, a.backend, a.depth)
    else:
        base0, out = bench(a.memra, a.model, a.backend, a.depth, profile=True)
        counts = dict(profile_ops(out))
    if not a.ops and not counts:
        sys.exit("ablate: no op names (the backend has no profile): pass --ops")
    names = a.ops.split(",") if a.ops else [n for n in counts if n not in SKIP_ALWAYS]
    rows = [(n, bench(a.memra, a.model, a.backend, a.depth, skip=n)[0]) for n in names]
    base1, _ = bench(a.memra, a.model, a.backend, a.depth)
    base = (base0 + base1) / 2
    print(f"base: {base0:.3f} / {base1:.3f} ms/tok (first, last), depth {a.depth}")
    if a.markdown:
        print("| op left out | count | ms/tok | saved a step | share | per op (us) |\n|---|---|---|---|---|---|")
    else:
        print(f"{'op':40s} {'count':>5s} {'ms/tok':>8s} {'saved ms':>9s} {'share':>6s} {'us/op':>8s}")
    for n, ms in rows:
        c = counts.get(n, 0)
        saved = base - ms
        per = f"{saved * 1000 / c:.1f}" if c else "-"
        if a.markdown:
            print(f"| {n} | {c} | {ms:.3f} | {saved:.3f} | {100 * saved / base:.1f}% | {per} |")
        else:
            print(f"{n:40s} {c:5d} {ms:8.3f} {saved:9.3f} {100 * saved / base:5.1f}% {per:>8s}")


if __name__ == "__main__":
    main()
