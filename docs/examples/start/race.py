#!/usr/bin/env python3
"""Interleaved race: race.py [--cold] [--runs N] [--prep CMD] NAME=CMD ...
Each round runs every command once (order rotated), PREP (untimed) before each,
with --cold the page cache, dentries and inodes dropped before each run.
Prints the median wall ms per command and the median of per-round ratios to the first."""
import subprocess, sys, time, statistics, os
args = sys.argv[1:]; runs = 30; cold = False; prep = None; cmds = []
while args:
    a = args.pop(0)
    if a == '--runs': runs = int(args.pop(0))
    elif a == '--cold': cold = True
    elif a == '--prep': prep = args.pop(0)
    else:
        n, c = a.split('=', 1); cmds.append((n, c))
times = {n: [] for n, _ in cmds}
ratios = {n: [] for n, _ in cmds}
dn = open(os.devnull, 'w')
for r in range(runs + 2):
    order = cmds[r % len(cmds):] + cmds[:r % len(cmds)]
    this = {}
    for n, c in order:
        if prep: subprocess.run(prep, shell=True, check=True)
        if cold:
            os.sync(); open('/proc/sys/vm/drop_caches', 'w').write('3')
        argv = c.split()
        t = time.perf_counter()
        p = subprocess.run(argv, stdout=dn)
        d = (time.perf_counter() - t) * 1000
        if p.returncode != 0: sys.exit(f'{n} failed: {p.returncode}')
        this[n] = d
    if r < 2: continue  # warm-up rounds
    for n, _ in cmds:
        times[n].append(this[n]); ratios[n].append(this[n] / this[cmds[0][0]])
load = open('/proc/loadavg').read().split()[:3]
print(f"runs={runs} cold={cold} load={' '.join(load)}")
for n, _ in cmds:
    t = sorted(times[n])
    print(f"{n:28s} median {statistics.median(t):7.2f} ms  [{t[len(t)//10]:.2f}-{t[len(t)*9//10]:.2f} p10-p90]  ratio to {cmds[0][0]}: {statistics.median(ratios[n]):.2f}")
