#!/usr/bin/env python3
"""The README's headline table from one or more `sparsesync bench --json`
reports: per case, sparsesync's median time over the floor's and the worst
of its ratios against the peers (each the median of per-round ratios, rounds
paired by number, as `--markdown` computes them), for the local copy and the
push. With --holes, for reports run with --floor-holes, a last column: the
local copy's and the push's time over the floor that keeps the source's holes
(copy cases only). Usage: headline.py [--holes] report.json [report.json ...]"""
import json, statistics, sys

LOCAL = ["cp", "cp-reflink", "rsync", "qemu-img", "bmaptool"]
TCP = ["rsync-daemon", "ssync"]


def walls(t):
    return {r["round"]: r["wall_s"] for r in t.get("runs", [])}


def ratio(mine, theirs):
    r = [mine[k] / theirs[k] for k in mine if k in theirs and theirs[k] > 0]
    return statistics.median(r) if r else None


def worst(mine, tools, names):
    got = []
    for p in names:
        t = tools.get(p)
        if t and not t.get("skipped") and t.get("runs"):
            x = ratio(mine, walls(t))
            if x is not None:
                got.append((x, p))
    if not got:
        return "skip"
    x, p = max(got)
    return "%.2f (%s)" % (x, p)


args = sys.argv[1:]
holes = "--holes" in args
args = [a for a in args if a != "--holes"]
head = "| workload | scenario | fs | local s | x floor | worst vs a peer | push s | x floor | worst vs a peer |"
print(head + (" x floor-holes (local, push) |" if holes else ""))
print("|---" * (10 if holes else 9) + "|")
for path in args:
    for c in json.load(open(path))["cases"]:
        tools = {t["name"]: t for t in c["tools"]}
        floor = walls(c["floor"])
        row = [c["workload"], c["scenario"], c["fs_type"]]
        for me, peers in (("sparsesync", LOCAL), ("sparsesync-tcp", TCP)):
            t = tools.get(me)
            if not t or t.get("skipped") or not t.get("runs"):
                row += ["skip", "", ""]
                continue
            mine = walls(t)
            row += ["%.3f" % statistics.median(mine.values()), "%.2f" % ratio(mine, floor), worst(mine, tools, peers)]
        if holes:
            fh = tools.get("floor-holes")
            got = []
            for me in ("sparsesync", "sparsesync-tcp"):
                t = tools.get(me)
                if fh and fh.get("runs") and t and t.get("runs"):
                    got.append("%.2f" % ratio(walls(t), walls(fh)))
            row.append(", ".join(got))
        print("| " + " | ".join(row) + " |")
