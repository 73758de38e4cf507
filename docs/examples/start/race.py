#!/usr/bin/env python3
"""Interleaved race: race.py [--cold] [--runs N] [--prep CMD] NAME=CMD ...
Each round runs every command once (order rotated), PREP (untimed) before each,
with --cold the page cache, dentries and inodes dropped before each run.
CMD may chain programs with ' && ' (each exec'd directly, no shell; the chain is timed whole).
Prints the load average before and after, the median wall ms per command with its p10-p90,
and the median of per-round ratios to the first command with their full range."""
import subprocess, sys, time, statistics, os
args = sys.argv[1:]; runs = 30; cold = False; prep = None; cmds = []
while args:
    a = args.pop(0)
    if a == '--runs': runs = int(args.pop(0))
    elif a == '--cold': cold = True
    elif a == '--prep': prep = args.pop(0)
    else:
        n, c = a.split('=', 1); cmds.append((n, [p.split() for p in c.split(' && ')]))
times = {n: [] for n, _ in cmds}
ratios = {n: [] for n, _ in cmds}
dn = open(os.devnull, 'w')
load0 = open('/proc/loadavg').read().split()[:3]
for r in range(runs + 2):
    order = cmds[r % len(cmds):] + cmds[:r % len(cmds)]
    this = {}
    for n, chain in order:
        if prep: subprocess.run(prep, shell=True, check=True)
        if cold:
            os.sync(); open('/proc/sys/vm/drop_caches', 'w').write('3')
        t = time.perf_counter()
        for argv in chain:
            p = subprocess.run(argv, stdout=dn)
            if p.returncode != 0: sys.exit(f'{n} failed: {p.returncode}')
        this[n] = (time.perf_counter() - t) * 1000
    if r < 2: continue  # warm-up rounds
    for n, _ in cmds:
        times[n].append(this[n]); ratios[n].append(this[n] / this[cmds[0][0]])
load1 = open('/proc/loadavg').read().split()[:3]
print(f"runs={runs} cold={cold} load before {' '.join(load0)}, after {' '.join(load1)}")
for n, _ in cmds:
    t = sorted(times[n]); q = sorted(ratios[n])
    print(f"{n:20s} median {statistics.median(t):7.2f} ms [{t[len(t)//10]:.2f}-{t[len(t)*9//10]:.2f} p10-p90]"
          f"  ratio to {cmds[0][0]}: {statistics.median(q):.2f} [{q[0]:.2f}-{q[-1]:.2f}]")
