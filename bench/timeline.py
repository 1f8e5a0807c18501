#!/usr/bin/env python3
"""Reads the per-launch CSV of `memra bench --timeline PREFIX` (PREFIX-dDEPTH.csv, make TIMELINE=1) and prints
one decode step's launches in order: when each one's first block passed its wait, how long its blocks worked
(first wait return to median and last block exit) and how long the next launch's wait then took to return.

Steps are cut after each launch whose name starts with --step-end (default k_argmax, the bench step's last
kernel). The step printed is the one whose length is the median of the recorded steps. The gap after a step's
last launch is the host's share: the id's download, the next batch's upload and the graph launch.

    python3 bench/timeline.py tl-9b-q4_k_m-d0.csv.gz [--first 60] [--step-end k_argmax]
"""
import argparse
import csv
import gzip
import statistics

TIMES = ("arrive_us", "wait_us", "wait_last_us", "exit_median_us", "exit_last_us")


def load(path):
    """The CSV's rows, times as floats."""
    op = gzip.open if path.endswith(".gz") else open
    with op(path, "rt") as f:
        rows = list(csv.DictReader(f))
    for r in rows:
        for k in TIMES:
            r[k] = float(r[k])
    return rows


def split_steps(rows, step_end):
    """The launches cut into steps after each launch named step_end...; an unfinished last step is dropped."""
    steps, cur = [], []
    for r in rows:
        cur.append(r)
        if r["kernel"].startswith(step_end):
            steps.append(cur)
            cur = []
    return steps


def step_rows(step, next_first):
    """Per launch of a step: (row, work, gap, span) in us, and the step's totals: length, work, positive gaps and
    the gap after its last launch (before next_first, the next step's first launch)."""
    out, work_sum, gap_sum = [], 0.0, 0.0
    for i, r in enumerate(step):
        n = step[i + 1] if i + 1 < len(step) else next_first
        work = r["exit_last_us"] - r["wait_us"]
        gap = n["wait_us"] - r["exit_last_us"]
        out.append((r, work, gap, n["wait_us"] - r["wait_us"]))
        work_sum += work
        gap_sum += max(gap, 0.0)
    total = {"length": next_first["wait_us"] - step[0]["wait_us"], "work": work_sum, "gaps": gap_sum,
             "host": next_first["wait_us"] - step[-1]["exit_last_us"]}
    return out, total


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("csv")
    ap.add_argument("--first", type=int, default=60, help="launches of the step to print (default 60)")
    ap.add_argument("--step-end", default="k_argmax", help="name prefix of a step's last launch")
    a = ap.parse_args()
    steps = split_steps(load(a.csv), a.step_end)
    if len(steps) < 2:
        raise SystemExit(f"timeline.py: {len(steps)} steps ending in {a.step_end} found, 2 needed")
    lens = sorted((steps[i + 1][0]["wait_us"] - steps[i][0]["wait_us"], i) for i in range(len(steps) - 1))
    pick = lens[len(lens) // 2][1]
    rows, tot = step_rows(steps[pick], steps[pick + 1][0])
    print(f"{len(steps)} steps; step lengths us: median {statistics.median(l for l, _ in lens):.1f}, "
          f"min {lens[0][0]:.1f}, max {lens[-1][0]:.1f}; step {pick} ({tot['length']:.1f} us, {len(rows)} launches):")
    print(f"{'#':>4} {'kernel':<56} {'blocks':>6} {'at':>8} {'early':>6} {'median':>7} {'work':>7} {'gap':>6} {'span':>7}")
    t0 = rows[0][0]["wait_us"]
    for i, (r, work, gap, span) in enumerate(rows[: a.first]):
        print(f"{i:>4} {r['kernel'][:56]:<56} {r['blocks']:>6} {r['wait_us'] - t0:>8.1f} "
              f"{r['wait_us'] - r['arrive_us']:>6.1f} {r['exit_median_us'] - r['wait_us']:>7.2f} {work:>7.2f} "
              f"{gap:>6.2f} {span:>7.2f}")
    print(f"step: {tot['length']:.1f} us = launches' work {tot['work']:.1f} (overlaps counted once per launch) "
          f"+ positive gaps {tot['gaps']:.1f}, of which {tot['host']:.1f} after the step's last launch (the host's "
          f"share: the id's download, the next batch's upload, the graph launch)")


if __name__ == "__main__":
    main()
