#!/usr/bin/env python3
"""Where a kernel's warps stall, from ncu's SASS source page (ncu -i REP --page source --csv --print-source sass).

usage: ncu_stalls.py SASS.csv[.gz] [--top K]
Per profiled launch: the stall-sampling total, the instructions executed, the 8 largest stall reasons (share
of all samples) and the K instructions with the most samples (default 12), each with its reasons. ncu prints
some launches twice in a row (the same counters): a launch equal to the one before it is left out."""
import csv
import gzip
import sys


def launches(rows):
    i = 0
    while i < len(rows):
        if rows[i] and rows[i][0] == 'Kernel Name':
            name, hdr, body = rows[i][1], rows[i + 1], []
            i += 2
            while i < len(rows) and not (rows[i] and rows[i][0] == 'Kernel Name'):
                if rows[i]:
                    body.append(rows[i])
                i += 1
            yield name, hdr, body
        else:
            i += 1


def num(v):
    try:
        return int(v.replace(',', ''))
    except ValueError:
        return 0


def main():
    args = sys.argv[1:]
    top = int(args[args.index('--top') + 1]) if '--top' in args else 12
    f = gzip.open(args[0], 'rt') if args[0].endswith('.gz') else open(args[0])
    prev = None
    for name, hdr, body in launches(list(csv.reader(f))):
        if (name, body) == prev:
            continue
        prev = (name, body)
        si = hdr.index('Warp Stall Sampling (All Samples)')
        ie = hdr.index('Instructions Executed')
        cols = [j for j, h in enumerate(hdr) if h.startswith('stall_') and 'Not Issued' not in h]
        tot = {hdr[j][6:]: sum(num(b[j]) for b in body) for j in cols}
        n = sum(tot.values()) or 1
        print('%s\n  samples %d, instructions executed %d' % (name[:110], n, sum(num(b[ie]) for b in body)))
        print('  ' + ', '.join('%s %.1f%%' % (k, 100 * v / n) for k, v in
                               sorted(tot.items(), key=lambda kv: -kv[1])[:8]))
        for b in sorted(body, key=lambda b: -num(b[si]))[:top]:
            why = ' '.join('%s=%d' % (hdr[j][6:], num(b[j])) for j in cols if num(b[j]))
            print('  %6d  %-52s %s' % (num(b[si]), b[1].strip()[:52], why))


if __name__ == '__main__':
    main()
