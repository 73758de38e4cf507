#!/usr/bin/env python3
"""CPU of sparsesync against each local peer, per case, from one or more
`sparsesync bench --json` reports: the median of per-round ratios, rounds
paired by number. By default the tools' own user + system time; with --busy
the machine's busy CPU over each run (`busy_cpu_s`: every CPU's busy time from
/proc/stat to the end of the run's sync, which counts the kernel's flusher
threads that write back what a tool left dirty; the fair measure, see
docs/benchmarks.md). Usage: cpu.py [--busy] report.json [report.json ...]"""
import json, statistics, sys

PEERS = ["cp", "cp-reflink", "rsync", "qemu-img", "bmaptool"]
args = sys.argv[1:]
busy = "--busy" in args
paths = [a for a in args if a != "--busy"]


def cpu(t):
    if busy:
        return {r["round"]: r.get("busy_cpu_s", -1) for r in t.get("runs") or []}
    return {r["round"]: r["user_s"] + r["sys_s"] for r in t.get("runs") or []}


print("| workload | scenario | fs | sparsesync %s s | " % ("busy CPU" if busy else "CPU") +
      " | ".join("vs " + p for p in PEERS) + " |")
print("|---|---|---|---|" + "---|" * len(PEERS))
for path in paths:
    for c in json.load(open(path))["cases"]:
        tools = {t["name"]: t for t in c["tools"]}
        ss = tools.get("sparsesync")
        if not ss or not ss.get("runs"):
            continue
        mine = {k: v for k, v in cpu(ss).items() if v >= 0}
        if not mine:
            continue
        cells = []
        for p in PEERS:
            t = tools.get(p)
            if not t or t.get("skipped") or not t.get("runs"):
                cells.append("skip")
                continue
            theirs = cpu(t)
            r = [mine[k] / theirs[k] for k in mine if k in theirs and theirs[k] > 0]
            cells.append("%.2f" % statistics.median(r) if r else "")
        print("| %s | %s | %s | %.3f | %s |" % (c["workload"], c["scenario"], c["fs_type"],
              statistics.median(mine.values()), " | ".join(cells)))
