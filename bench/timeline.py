#!/usr/bin/env python3
"""Reads the per-launch CSV of `memra bench --timeline PREFIX` (PREFIX-dDEPTH.csv, make TIMELINE=1) and prints
one decode step's launches in order: when each one's first block passed its wait, how long its blocks worked
(first wait return to median and last block exit) and how long the next launch's wait then took to return.

Steps are cut after each launch whose name starts with --step-end (default k_argmax, the bench step's last
kernel). The step printed is the one whose length is the median of the recorded steps.

    python3 bench/timeline.py tl-9b-q4_k_m-r1-d0.csv.gz [--first 60] [--step-end k_argmax]
"""
import argparse
import csv
import gzip
import statistics


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("csv")
    ap.add_argument("--first", type=int, default=60, help="launches of the step to print (default 60)")
    ap.add_argument("--step-end", default="k_argmax", help="name prefix of a step's last launch")
    a = ap.parse_args()
    op = gzip.open if a.csv.endswith(".gz") else open
    with op(a.csv, "rt") as f:
        rows = list(csv.DictReader(f))
    for r in rows:
        for k in ("arrive_us", "wait_us", "wait_last_us", "exit_median_us", "exit_last_us"):
            r[k] = float(r[k])
    steps, cur = [], []
    for r in rows:
        cur.append(r)
        if r["kernel"].startswith(a.step_end):
            steps.append(cur)
            cur = []
    if len(steps) < 2:
        raise SystemExit(f"timeline.py: {len(steps)} steps ending in {a.step_end} found")
    # a step's length: its first launch's wait to the next step's first wait
    lens = [(steps[i + 1][0]["wait_us"] - steps[i][0]["wait_us"], i) for i in range(len(steps) - 1)]
    med = sorted(lens)[len(lens) // 2]
    s, nxt = steps[med[1]], steps[med[1] + 1][0]
    print(f"{len(steps)} steps; step lengths us: median {statistics.median(l for l, _ in lens):.1f}, "
          f"min {min(lens)[0]:.1f}, max {max(lens)[0]:.1f}; step {med[1]} ({med[0]:.1f} us, {len(s)} launches):")
    print(f"{'#':>4} {'kernel':<56} {'blocks':>6} {'at':>8} {'early':>6} {'median':>7} {'work':>7} {'gap':>6} {'span':>7}")
    t0 = s[0]["wait_us"]
    tot = {"work": 0.0, "gap": 0.0}
    for i, r in enumerate(s):
        n = s[i + 1] if i + 1 < len(s) else nxt
        work = r["exit_last_us"] - r["wait_us"]
        gap = n["wait_us"] - r["exit_last_us"]
        tot["work"] += work
        tot["gap"] += max(gap, 0.0)
        if i < a.first:
            print(f"{i:>4} {r['kernel'][:56]:<56} {r['blocks']:>6} {r['wait_us'] - t0:>8.1f} "
                  f"{r['wait_us'] - r['arrive_us']:>6.1f} {r['exit_median_us'] - r['wait_us']:>7.2f} {work:>7.2f} "
                  f"{gap:>6.2f} {n['wait_us'] - r['wait_us']:>7.2f}")
    host = nxt["wait_us"] - s[-1]["exit_last_us"]
    print(f"step: {med[0]:.1f} us = launches' work {tot['work']:.1f} (overlaps counted once per launch) "
          f"+ positive gaps {tot['gap']:.1f}, of which {host:.1f} after the step's last launch (the host's share: "
          f"the id's download, the next batch's upload, the graph launch)")


if __name__ == "__main__":
    main()
