#!/bin/bash
# Session 37, run 3: why is 9b q4_k_m 2.6% slower with the one-MMA mmvq_sb6 while 27b is not? ncu durations of
# every Q6_K int8 launch (template argument 14) of 9b decode steps, memra0 (old mmvq_sb6) against memra (new).
#   Device:      OUT=$OUT bash bench/next_run_q6ncu.sh   (carry .bin)
set -u
T0=$(date +%s)
bash bench/unpack.sh .bin
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
f=/tmp/m.gguf
.bin/memra mkmodel --preset 9b --type q4_k_m --vocab tests/data/tiny-dense.bf16.gguf -o $f >/dev/null 2>&1
for b in memra0 memra; do
  timeout 150 /usr/local/cuda/bin/ncu --clock-control none --csv --print-units base --kernel-name-base demangled -k regex:'k_mmvq_tm' \
    --metrics gpu__time_duration.sum,launch__registers_per_thread,launch__grid_size,launch__block_size,sm__warps_active.avg.pct_of_peak_sustained_active,dram__bytes_read.sum \
    .bin/$b bench -m $f --backend cuda --prefill 16 --depth 0 --decode-tokens 2 --reps 1 >$OUT/ncu-$b.csv 2>$OUT/ncu-$b.err
  echo "$b ncu rc=$? t=$(( $(date +%s) - T0 ))"
done
python3 - "$OUT" <<'PY'
import csv, sys, collections
def load(p):
    rows = [r for r in csv.reader(open(p)) if len(r) > 10]
    h = rows[0]; ix = {k: i for i, k in enumerate(h)}
    d = collections.OrderedDict()
    for r in rows[1:]:
        if not r[ix['ID']].isdigit(): continue
        k = (r[ix['Kernel Name']][:60], r[ix['Grid Size']] if 'Grid Size' in ix else '')
        d.setdefault(r[ix['ID']], {})['name'] = r[ix['Kernel Name']]
        d[r[ix['ID']]][r[ix['Metric Name']]] = r[ix['Metric Value']]
    return d
for b in ('memra0', 'memra'):
    d = load(f'{sys.argv[1]}/ncu-{b}.csv')
    agg = collections.OrderedDict()
    for v in d.values():
        k = (v['name'][:70], v.get('launch__grid_size'), v.get('launch__block_size'), v.get('launch__registers_per_thread'))
        a = agg.setdefault(k, [0, 0.0, 0.0, 0.0]); a[0] += 1
        a[1] += float(v.get('gpu__time_duration.sum', '0').replace(',', ''))
        a[2] += float(v.get('sm__warps_active.avg.pct_of_peak_sustained_active', '0').replace(',', ''))
        a[3] += float(v.get('dram__bytes_read.sum', '0').replace(',', ''))
    print(f'== {b}: kernel, grid, block, regs: count, mean us, warps active %, MB read')
    for k, a in agg.items():
        print(f'{k[0]:70s} {k[1]:>6} {k[2]:>4} {k[3]:>4}  {a[0]:4d} {a[1]/a[0]/1000:8.2f} {a[2]/a[0]:6.1f} {a[3]/a[0]/1e6:8.2f}')
PY
echo "t=$(( $(date +%s) - T0 ))"
