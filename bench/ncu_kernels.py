#!/usr/bin/env python3
"""Sums an ncu --csv --metrics gpu__time_duration.sum log by kernel and grid.

usage: ncu_kernels.py LOG.csv[.gz] [--from-embed N] [--after-argmax N] [--top K]
--from-embed N: only the kernels from the N-th k_embed launch (0-based; a prefill of T tokens starts with one,
grid (T, 1, 1)) up to the next k_embed, so that one prefill is summed alone.
--after-argmax N: only the kernels after the N-th k_argmax launch up to and with the next one: one decode step
(a step ends with its argmax)."""
import collections
import csv
import gzip
import re
import sys


def main():
    args = sys.argv[1:]
    path = args[0]
    start = int(args[args.index('--from-embed') + 1]) if '--from-embed' in args else None
    after = int(args[args.index('--after-argmax') + 1]) if '--after-argmax' in args else None
    top = int(args[args.index('--top') + 1]) if '--top' in args else 25
    f = gzip.open(path, 'rt') if path.endswith('.gz') else open(path)
    rows = list(csv.reader(f))
    h = [i for i, r in enumerate(rows) if r and r[0] == 'ID'][0]
    hdr = rows[h]
    ix = {k: hdr.index(k) for k in ['Kernel Name', 'Grid Size', 'Metric Name', 'Metric Value']}
    ks = [(re.sub(r'\(.*', '', r[ix['Kernel Name']]).replace('void ', '')[:44], r[ix['Grid Size']],
           float(r[ix['Metric Value']].replace(',', ''))) for r in rows[h + 1:]
          if len(r) >= len(hdr) and r[ix['Metric Name']] == 'gpu__time_duration.sum']
    if start is not None:
        emb = [i for i, k in enumerate(ks) if k[0].startswith('k_embed')]
        ks = ks[emb[start]:emb[start + 1] if start + 1 < len(emb) else len(ks)]
    if after is not None:
        am = [i for i, k in enumerate(ks) if k[0].startswith('k_argmax')]
        ks = ks[am[after] + 1:am[after + 1] + 1]
    g = collections.defaultdict(lambda: [0, 0.0])
    tot = 0.0
    for n, gr, t in ks:
        e = g[(n, gr)]
        e[0] += 1
        e[1] += t
        tot += t
    print('%d kernels, %.1f us' % (len(ks), tot / 1e3))
    for (n, gr), (c, t) in sorted(g.items(), key=lambda x: -x[1][1])[:top]:
        print('%-44s %-14s %5d %9.1f us total %8.1f us each %5.1f%%' % (n, gr, c, t / 1e3, t / c / 1e3, 100 * t / tot))


if __name__ == '__main__':
    main()
