package tcpsync

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sparsesync/sparsesync/bench/stats"
	"github.com/sparsesync/sparsesync/internal/testutil/layout"
	"github.com/sparsesync/sparsesync/internal/testutil/loopfs"
)

// measurement is one run of one tool: wall time, CPU of each side, wire bytes.
type measurement struct {
	wall, cliCPU, srvCPU float64
	wire                 int64
}

func median(ms []measurement) measurement {
	pick := func(f func(measurement) float64) float64 {
		v := make([]float64, len(ms))
		for i, m := range ms {
			v[i] = f(m)
		}
		return stats.Median(v)
	}
	return measurement{
		wall:   pick(func(m measurement) float64 { return m.wall }),
		cliCPU: pick(func(m measurement) float64 { return m.cliCPU }),
		srvCPU: pick(func(m measurement) float64 { return m.srvCPU }),
		wire:   int64(pick(func(m measurement) float64 { return float64(m.wire) })),
	}
}

// procCPU returns utime+stime (+ reaped children's, for forking daemons) of pid in seconds.
func procCPU(b *testing.B, pid int) float64 {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		b.Fatal(err)
	}
	f := strings.Fields(string(raw[strings.LastIndexByte(string(raw), ')')+2:]))
	var ticks float64
	for _, i := range []int{11, 12, 13, 14} { // utime stime cutime cstime (fields 14-17)
		v, _ := strconv.ParseFloat(f[i], 64)
		ticks += v
	}
	return ticks / 100
}

func runTimed(b *testing.B, srvPid int, name string, args ...string) (measurement, []byte) {
	before := procCPU(b, srvPid)
	cmd := exec.Command(name, args...)
	start := time.Now()
	out, err := cmd.CombinedOutput()
	wall := time.Since(start).Seconds()
	if err != nil {
		b.Fatalf("%s %v: %v\n%s", name, args, err, out)
	}
	time.Sleep(200 * time.Millisecond) // let the daemon reap its children
	cpu := cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	return measurement{wall: wall, cliCPU: cpu.Seconds(), srvCPU: procCPU(b, srvPid) - before}, out
}

func freePort(b *testing.B) int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

func startProc(b *testing.B, ready func() bool, name string, args ...string) *exec.Cmd {
	cmd := exec.Command(name, args...)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = cmd.Process.Kill(); _, _ = cmd.Process.Wait() })
	for i := 0; !ready(); i++ {
		if i > 500 {
			b.Fatalf("%s did not start", name)
		}
		time.Sleep(10 * time.Millisecond)
	}
	return cmd
}

func dialable(addr string) func() bool {
	return func() bool {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
		}
		return err == nil
	}
}

var rsyncSent = regexp.MustCompile(`Total bytes sent: ([\d,]+)`)
var rsyncRecv = regexp.MustCompile(`Total bytes received: ([\d,]+)`)

func rsyncWire(b *testing.B, out []byte) int64 {
	var n int64
	for _, re := range []*regexp.Regexp{rsyncSent, rsyncRecv} {
		m := re.FindSubmatch(out)
		if m == nil {
			b.Fatalf("no rsync stats in %s", out)
		}
		v, _ := strconv.ParseInt(strings.ReplaceAll(string(m[1]), ",", ""), 10, 64)
		n += v
	}
	return n
}

func cpSparse(b *testing.B, src, dst string) {
	os.Remove(dst)
	if out, err := exec.Command("cp", "--sparse=always", "--preserve=timestamps", src, dst).CombinedOutput(); err != nil {
		b.Fatalf("cp: %v %s", err, out)
	}
}

// BenchmarkVsRsync pushes the design's workload (2 GiB, 10% data in ~400
// extents, mixed random/text/zero content) to `sparsesync serve` and to an
// rsync daemon, both on 127.0.0.1, both as separate processes, and reports
// medians of SPARSESYNC_BENCH_RUNS (3) runs: wall seconds, client and server
// CPU seconds and wire bytes, plus tcpsync/rsync ratios. tcpsync's receiver
// fdatasyncs the target before it answers; rsync never syncs. Run with
//
//	go test ./tcpsync -run XXX -bench VsRsync -benchtime 1x
func BenchmarkVsRsync(b *testing.B) {
	loopfs.NeedRoot(b)
	if _, err := exec.LookPath("rsync"); err != nil {
		b.Skip("rsync not installed")
	}
	runs := 3
	if s := os.Getenv("SPARSESYNC_BENCH_RUNS"); s != "" {
		runs, _ = strconv.Atoi(s)
	}
	mnt := loopfs.Mount(b, loopfs.Ext4, 12<<30)
	bin := filepath.Join(mnt, "sparsesync")
	if out, err := exec.Command("go", "build", "-o", bin, "../cmd/sparsesync").CombinedOutput(); err != nil {
		b.Fatalf("go build: %v %s", err, out)
	}
	work := filepath.Join(mnt, "work")
	tsRoot, rsRoot := filepath.Join(mnt, "tsroot"), filepath.Join(mnt, "rsroot")
	for _, d := range []string{work, tsRoot, rsRoot} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			b.Fatal(err)
		}
	}
	orig, mutated := filepath.Join(work, "orig.img"), filepath.Join(work, "mutated.img")
	if err := writeImage(orig, 2<<30, 0.1, 104, 2026); err != nil {
		b.Fatal(err)
	}
	cpSparse(b, orig, mutated)
	mutate(b, mutated, 514, 7)
	// rsync's quick check compares mtimes in whole seconds: make the change visible.
	later := time.Now().Add(time.Minute)
	if err := os.Chtimes(mutated, later, later); err != nil {
		b.Fatal(err)
	}

	tok := filepath.Join(work, "token")
	if err := os.WriteFile(tok, []byte(NewToken()), 0o600); err != nil {
		b.Fatal(err)
	}
	tsAddr := fmt.Sprintf("127.0.0.1:%d", freePort(b))
	ts := startProc(b, dialable(tsAddr), bin, "serve", "--root", tsRoot, "--listen", tsAddr, "--token-file", tok)
	rsPort := freePort(b)
	conf := filepath.Join(work, "rsyncd.conf")
	if err := os.WriteFile(conf, []byte(fmt.Sprintf("use chroot = yes\nuid = root\ngid = root\n[m]\npath = %s\nread only = no\n", rsRoot)), 0o600); err != nil {
		b.Fatal(err)
	}
	rs := startProc(b, dialable(fmt.Sprintf("127.0.0.1:%d", rsPort)), "rsync", "--daemon", "--no-detach", "--config", conf,
		"--address", "127.0.0.1", "--port", strconv.Itoa(rsPort))
	rsURL := fmt.Sprintf("rsync://127.0.0.1:%d/m/dst.img", rsPort)
	tsDst, rsDst := filepath.Join(tsRoot, "dst.img"), filepath.Join(rsRoot, "dst.img")

	tcpsyncRun := func(src string, extra ...string) measurement {
		args := append([]string{"push", "--json", "--token-file", tok}, extra...)
		args = append(args, src, tsAddr, "dst.img")
		m, out := runTimed(b, ts.Process.Pid, bin, args...)
		var res struct {
			Sent     int64 `json:"wire_bytes_sent"`
			Received int64 `json:"wire_bytes_received"`
			Verified bool  `json:"verified"`
		}
		if err := json.Unmarshal(out, &res); err != nil || !res.Verified {
			b.Fatalf("push output %s: %v", out, err)
		}
		m.wire = res.Sent + res.Received
		return m
	}
	rsyncRun := func(src string, flags ...string) measurement {
		args := append(append([]string{"-t", "--stats"}, flags...), src, rsURL)
		m, out := runTimed(b, rs.Process.Pid, "rsync", args...)
		m.wire = rsyncWire(b, out)
		return m
	}
	check := func(src, dst string) {
		if out, err := exec.Command("cmp", src, dst).CombinedOutput(); err != nil {
			b.Fatalf("cmp %s %s: %v %s", src, dst, err, out)
		}
	}
	type tool struct {
		name  string
		setup func()
		run   func() measurement
		src   string
		dst   string
	}
	reset := func(dst string, base string) func() {
		return func() {
			os.Remove(dst + sidecarSuffix)
			if base == "" {
				os.Remove(dst)
				return
			}
			cpSparse(b, base, dst)
		}
	}
	cases := []struct {
		name  string
		tools []tool
	}{
		{"full", []tool{
			{"tcpsync", reset(tsDst, ""), func() measurement { return tcpsyncRun(orig) }, orig, tsDst},
			{"tcpsync-zstd", reset(tsDst, ""), func() measurement { return tcpsyncRun(orig, "--compress", "zstd") }, orig, tsDst},
			{"rsync --sparse", reset(rsDst, ""), func() measurement { return rsyncRun(orig, "--sparse") }, orig, rsDst},
		}},
		{"1pct", []tool{
			{"tcpsync", reset(tsDst, orig), func() measurement { return tcpsyncRun(mutated) }, mutated, tsDst},
			{"rsync --sparse --inplace", reset(rsDst, orig), func() measurement { return rsyncRun(mutated, "--sparse", "--inplace") }, mutated, rsDst},
		}},
		{"none-content", []tool{
			{"tcpsync --full-compare", reset(tsDst, orig), func() measurement { return tcpsyncRun(orig, "--full-compare") }, orig, tsDst},
			{"rsync -c", reset(rsDst, orig), func() measurement { return rsyncRun(orig, "--sparse", "-c") }, orig, rsDst},
		}},
		{"none-quick", []tool{
			{"tcpsync", func() { reset(tsDst, "")(); tcpsyncRun(orig) }, func() measurement { return tcpsyncRun(orig) }, orig, tsDst},
			{"rsync", reset(rsDst, orig), func() measurement { return rsyncRun(orig, "--sparse") }, orig, rsDst},
		}},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			res := map[string]measurement{}
			for b.Loop() {
				for _, tl := range c.tools {
					var ms []measurement
					for range runs {
						tl.setup()
						syscall.Sync() // the setup's copy must not be flushed inside the timing
						ms = append(ms, tl.run())
						check(tl.src, tl.dst)
					}
					res[tl.name] = median(ms)
				}
			}
			rsName := c.tools[len(c.tools)-1].name
			rsm := res[rsName]
			for _, tl := range c.tools {
				m := res[tl.name]
				b.Logf("%-26s wall %.3f s  cpu client %.2f s server %.2f s  wire %d B  (wall %.2fx, wire %.4fx of %s)",
					tl.name, m.wall, m.cliCPU, m.srvCPU, m.wire, m.wall/rsm.wall, float64(m.wire)/float64(rsm.wire), rsName)
			}
			m := res["tcpsync"]
			if _, ok := res["tcpsync"]; !ok {
				m = res[c.tools[0].name]
			}
			b.ReportMetric(m.wall, "tcpsync-wall-s")
			b.ReportMetric(m.cliCPU+m.srvCPU, "tcpsync-cpu-s")
			b.ReportMetric(float64(m.wire), "tcpsync-wire-B")
			b.ReportMetric(rsm.wall, "rsync-wall-s")
			b.ReportMetric(rsm.cliCPU+rsm.srvCPU, "rsync-cpu-s")
			b.ReportMetric(float64(rsm.wire), "rsync-wire-B")
			b.ReportMetric(m.wall/rsm.wall, "wall-ratio")
		})
	}
}

// BenchmarkManyExtents pushes 100,000 extents of 4 KiB (410 MB of data) to
// an in-process server on 127.0.0.1, full sync to an empty target.
func BenchmarkManyExtents(b *testing.B) {
	loopfs.NeedRoot(b)
	for _, kind := range []loopfs.Kind{loopfs.Tmpfs, loopfs.Ext4} {
		b.Run(string(kind), func(b *testing.B) {
			mnt := loopfs.Mount(b, kind, 2<<30)
			root := filepath.Join(mnt, "root")
			if err := os.Mkdir(root, 0o755); err != nil {
				b.Fatal(err)
			}
			src := filepath.Join(mnt, "src")
			layout.Create(b, src, layout.Standard()[5])
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			addr, wait, err := ServeLoopback(ctx, &Server{Root: root, NoAuth: true})
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(100_000 * 4096)
			b.ReportAllocs()
			var walls []float64
			for b.Loop() {
				os.Remove(filepath.Join(root, "img"))
				os.Remove(filepath.Join(root, "img"+sidecarSuffix))
				st, err := PushFile(ctx, addr, src, "img", &Options{NoAuth: true, MaxAttempts: 1})
				if err != nil || !st.Verified {
					b.Fatal(err)
				}
				walls = append(walls, st.Elapsed.Seconds())
			}
			slices.Sort(walls)
			b.ReportMetric(walls[len(walls)/2], "median-wall-s")
			cancel()
			_ = wait()
		})
	}
}
