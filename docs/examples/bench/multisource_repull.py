#!/usr/bin/env python3
"""A multi-source re-pull, two builds of the client raced (docs/multi-source.md).

usage (as root): multisource_repull.py SPARSESYNC_A SPARSESYNC_B DIR

Makes in DIR a 2 GiB image with 1 GiB of data (old.img) and the next version
(1% of its data's 4 KiB blocks rewritten) beneath DIR/s1 and DIR/s2, serves
both with A's `serve --no-auth` on 127.0.0.1 (PORT and PORT+1, env PORT,
default 17371), then pulls the new version from both into a fresh copy of
old.img with A and with B in turn: ROUNDS rounds (default 5) after a warm-up
one, files evicted and NAP seconds (default 8) of pause before each run.
Checks every result with cmp; prints B/A's median wall ratio and the
client's CPU seconds.
"""
import os, sys, subprocess, time, json, random, resource, statistics, shutil
A, B = sys.argv[1], sys.argv[2]
ROUNDS = int(os.environ.get("ROUNDS", "5")); NAP = float(os.environ.get("NAP", "8"))
D = sys.argv[3]
PORT = int(os.environ.get("PORT", "17371"))
SIZE = 2 << 30
def evict(p):
    fd = os.open(p, os.O_RDONLY); os.fsync(fd); os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED); os.close(fd)
def make():
    rnd = random.Random(7)
    os.makedirs(f"{D}/s1", exist_ok=True); os.makedirs(f"{D}/s2", exist_ok=True)
    old = f"{D}/old.img"
    if not os.path.exists(old):
        with open(old, "wb") as f:
            f.truncate(SIZE)
            off = 0
            while off < SIZE:  # 50% data in extents of 256 KiB-4 MiB
                n = rnd.randrange(64, 1024) * 4096
                if rnd.random() < 0.5:
                    f.seek(off); f.write(rnd.randbytes(min(n, SIZE - off)))
                off += n
        subprocess.run(["cp", "--sparse=always", old, f"{D}/s1/disk.img"], check=True)
        # 1% of the data blocks rewritten
        out = subprocess.run(["filefrag", "-e", old], capture_output=True, text=True).stdout
        with open(f"{D}/s1/disk.img", "r+b") as f:
            fd = f.fileno(); off = 0; blocks = []
            while True:
                try: off = os.lseek(fd, off, os.SEEK_DATA)
                except OSError: break
                end = os.lseek(fd, off, os.SEEK_HOLE)
                blocks += range(off // 4096, end // 4096); off = end
            for b in rnd.sample(blocks, len(blocks) // 100):
                f.seek(b * 4096); f.write(rnd.randbytes(4096))
        subprocess.run(["cp", "--sparse=always", f"{D}/s1/disk.img", f"{D}/s2/disk.img"], check=True)
        subprocess.run(["sync"])
make()
srv = [subprocess.Popen([A, "serve", "--listen", f"127.0.0.1:{p}", "--root", f"{D}/{r}", "--no-auth"], stderr=subprocess.DEVNULL) for p, r in ((PORT, "s1"), (PORT + 1, "s2"))]
time.sleep(1)
res = {A: [], B: []}
try:
    for r in range(ROUNDS + 1):
        order = [A, B] if r % 2 == 0 else [B, A]
        for exe in order:
            dst = f"{D}/dst.img"
            for p in (dst, dst + ".tcpsync"):
                if os.path.exists(p): os.unlink(p)
            subprocess.run(["cp", "--sparse=always", f"{D}/old.img", dst], check=True)
            subprocess.run(["sync"])
            for p in (dst, f"{D}/s1/disk.img", f"{D}/s2/disk.img"): evict(p)
            time.sleep(NAP)
            t0 = time.time(); ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
            out = subprocess.run([exe, "pull", "--no-auth", "--json", "--progress", "never", "--from", f"127.0.0.1:{PORT}/disk.img", "--from", f"127.0.0.1:{PORT + 1}/disk.img", dst], capture_output=True, text=True)
            t = time.time() - t0; ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu = ru1.ru_utime + ru1.ru_stime - ru0.ru_utime - ru0.ru_stime
            if out.returncode != 0: print(out.stdout, out.stderr); sys.exit(1)
            j = json.loads(out.stdout)
            if subprocess.run(["cmp", dst, f"{D}/s1/disk.img"]).returncode != 0: print("MISMATCH"); sys.exit(1)
            if r > 0: res[exe].append((t, cpu))
            print(r, "A" if exe == A else "B", f"{t:.2f}s cpu {cpu:.2f} copied {j.get('copied_bytes')} unchanged {j.get('unchanged_bytes')}", flush=True)
finally:
    for s in srv: s.terminate()
ra = [b[0] / a[0] for a, b in zip(res[A], res[B])]
print("B/A wall median", statistics.median(ra), "range", min(ra), max(ra))
print("cpu A", statistics.median([x[1] for x in res[A]]), "B", statistics.median([x[1] for x in res[B]]))
