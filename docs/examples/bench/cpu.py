#!/usr/bin/env python3
"""CPU (user + system) of sparsesync against each local peer, per case, from a
`sparsesync bench --json` report: the median of per-round ratios, rounds paired
by number. Usage: cpu.py report.json"""
import json, statistics, sys

rep = json.load(open(sys.argv[1]))
print("| workload | scenario | fs | sparsesync CPU s | " + " | ".join(
    "vs " + p for p in ["cp", "cp-reflink", "rsync", "qemu-img", "bmaptool"]) + " |")
print("|---|---|---|---|" + "---|" * 5)
for c in rep["cases"]:
    tools = {t["name"]: t for t in c["tools"]}
    ss = tools.get("sparsesync")
    if not ss or not ss.get("runs"):
        continue
    cpu = lambda t: {r["round"]: r["user_s"] + r["sys_s"] for r in t.get("runs", [])}
    mine = cpu(ss)
    cells = []
    for p in ["cp", "cp-reflink", "rsync", "qemu-img", "bmaptool"]:
        t = tools.get(p)
        if not t or t.get("skipped") or not t.get("runs"):
            cells.append("skip")
            continue
        theirs = cpu(t)
        r = [mine[k] / theirs[k] for k in mine if k in theirs and theirs[k] > 0]
        cells.append("%.2f" % statistics.median(r) if r else "")
    print("| %s | %s | %s | %.3f | %s |" % (c["workload"], c["scenario"], c["fs_type"],
          statistics.median(mine.values()), " | ".join(cells)))
