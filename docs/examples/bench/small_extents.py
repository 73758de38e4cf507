#!/usr/bin/env python3
"""Small extents through the multi-source pull, replica export and push
--replica: two builds raced (docs/multi-source.md, docs/replicas.md).

usage (as root): small_extents.py SPARSESYNC_A SPARSESYNC_B DIR

Makes in DIR (an ext4 direct-I/O loop mount, for the figures in the docs)
the tiny-extents shape: 100,000 extents of 4 KiB, one every 8 KiB, both as
src/tiny and as the head of a replica directory rep/. Then, ROUNDS rounds
(default 3), each build in turn, caches dropped and NAP seconds (default 3)
before each run: a pull of src/tiny from one and from three servers
(`pull --from`), `replica export rep`, and `push --replica rep` to a server.
Servers are the build's own `serve --no-auth` on 127.0.0.1 (a port of
their choosing). Every result is compared with the source; prints each
case's median seconds per build and B/A's median per-round ratio.
"""
import os, re, statistics, subprocess, sys, time

A, B, D = sys.argv[1], sys.argv[2], sys.argv[3]
ROUNDS = int(os.environ.get("ROUNDS", "3"))
NAP = float(os.environ.get("NAP", "3"))
N = 100_000


def make():
    os.makedirs(f"{D}/src", exist_ok=True)
    if not os.path.exists(f"{D}/rep"):
        subprocess.run([A, "replica", "create", "--size", str(N * 8192), f"{D}/rep"], check=True, stdout=subprocess.DEVNULL)
    for p in (f"{D}/src/tiny", f"{D}/rep/volume-head-000.img"):
        fd = os.open(p, os.O_WRONLY | os.O_CREAT, 0o644)
        os.ftruncate(fd, N * 8192)
        for i in range(N):
            os.pwrite(fd, (i.to_bytes(8, "little") + b"\x5a" * 8) * 256, i * 8192)
        os.fsync(fd)
        os.close(fd)


def serve(binary, root):
    p = subprocess.Popen([binary, "serve", "--no-auth", "--listen", "127.0.0.1:0", "--root", root],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    for line in p.stdout:
        m = re.search(r"127\.0\.0\.1:\d+", line)
        if m:
            return p, m.group(0)
    raise SystemExit(f"{binary} serve printed no address")


def drop():
    subprocess.run(["sync"], check=True)
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3")


def timed(cmd):
    drop()
    time.sleep(NAP)
    t = time.monotonic()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    return time.monotonic() - t


def same(a, b):
    subprocess.run(["cmp", a, b], check=True)


def case(binary, name):
    out = f"{D}/out.img"
    for p in (out, out + ".tcpsync"):
        if os.path.exists(p):
            os.remove(p)
    servers = []
    try:
        if name.startswith("pull"):
            k = int(name[-1])
            servers = [serve(binary, f"{D}/src") for _ in range(k)]
            froms = [a for _, addr in servers for a in ("--from", f"{addr}/tiny")]
            s = timed([binary, "pull", "--no-auth", *froms, out])
            same(f"{D}/src/tiny", out)
        elif name == "export":
            s = timed([binary, "replica", "export", f"{D}/rep", out])
            same(f"{D}/rep/volume-head-000.img", out)
        else:  # push-replica
            servers = [serve(binary, D)]
            s = timed([binary, "push", "--no-auth", "--replica", f"{D}/rep", servers[0][1], "out.img"])
            same(f"{D}/rep/volume-head-000.img", out)
    finally:
        for p, _ in servers:
            p.terminate()
            p.wait()
    return s


make()
cases = ["pull-from-1", "pull-from-3", "export", "push-replica"]
res = {(b, c): [] for b in (A, B) for c in cases}
for r in range(ROUNDS):
    for c in cases:
        for b in ((A, B) if r % 2 == 0 else (B, A)):
            res[(b, c)].append(case(b, c))
for c in cases:
    a, b = res[(A, c)], res[(B, c)]
    ratio = statistics.median(y / x for x, y in zip(a, b))
    print(f"{c:14s} A {statistics.median(a):6.2f} s  B {statistics.median(b):6.2f} s  B/A {ratio:.2f}")
