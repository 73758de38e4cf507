package bench

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/sparsesync/sparsesync/internal/patternfile"
)

// RunBwlimit measures how well sparsesync holds --bwlimit: at each rate,
// in each place, a copy to a new file, a re-sync after 1% of the blocks
// changed, and (with Serve and Push) a push. Each run is a separate
// sparsesync process whose I/O the kernel accounts (/proc/PID/io); its
// bytes per whole second, over the rate, are the row's windows. The rows
// come back in run order; a run that fails is a row with its error.
func RunBwlimit(ctx context.Context, cfg BwlimitConfig) ([]BwlimitRow, error) {
	if len(cfg.Places) == 0 || cfg.Local == nil {
		return nil, fmt.Errorf("bench: bwlimit needs places and the local command")
	}
	if len(cfg.Rates) == 0 {
		cfg.Rates = []int64{10 << 20, 50 << 20, 200 << 20}
	}
	if cfg.Seconds <= 0 {
		cfg.Seconds = 6
	}
	var rows []BwlimitRow
	for _, pl := range cfg.Places {
		for _, rate := range cfg.Rates {
			rs, err := bwlimitPlace(ctx, cfg, pl, rate)
			rows = append(rows, rs...)
			if err != nil {
				return rows, err
			}
		}
	}
	return rows, nil
}

// bwlimitPlace runs the modes at one rate in one place.
func bwlimitPlace(ctx context.Context, cfg BwlimitConfig, pl Place, rate int64) ([]BwlimitRow, error) {
	dir, err := os.MkdirTemp(pl.Dir, "bwlimit-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	// Data for Seconds at the rate, in 1 MiB extents spread over four
	// times as much file.
	data := max(int64(cfg.Seconds*float64(rate))>>20, 4) << 20
	src, dst := filepath.Join(dir, "src"), filepath.Join(dir, "dst")
	l := patternfile.Layout{Name: "bwlimit", Size: 4 * data}
	for off := int64(0); off < l.Size; off += 4 << 20 {
		l.Data = append(l.Data, patternfile.Range{Off: off, Len: 1 << 20})
	}
	if err := patternfile.Write(src, l); err != nil {
		return nil, err
	}
	row := func(mode, measure string) BwlimitRow {
		return BwlimitRow{Place: pl.Name, Mode: mode, Measure: measure, Rate: rate}
	}
	var rows []BwlimitRow

	r := row("copy", "write_bytes")
	if err := cfg.settle(ctx, dir, cfg.Local(src, dst, rate)); err != nil {
		return rows, err
	}
	measured(ctx, &r, cfg.Local(src, dst, rate), "write_bytes")
	rows = append(rows, r)

	// A re-sync reads both files: half the data's time at the rate.
	if err := rewriteOnePercent(src, l); err != nil {
		return rows, err
	}
	r = row("resync", "read_bytes")
	if err := cfg.settle(ctx, dir, cfg.Local(src, dst, rate)); err != nil {
		return rows, err
	}
	measured(ctx, &r, cfg.Local(src, dst, rate), "read_bytes")
	rows = append(rows, r)

	if cfg.Serve == nil || cfg.Push == nil {
		return rows, nil
	}
	r = row("push", "wchar")
	root := filepath.Join(dir, "root")
	if err := os.Mkdir(root, 0o755); err != nil {
		return rows, err
	}
	srv, addr, err := startServe(ctx, cfg.Serve(root))
	if err != nil {
		r.Error = err.Error()
		return append(rows, r), nil
	}
	defer func() { _ = srv.Process.Kill(); _ = srv.Wait() }()
	if err := cfg.settle(ctx, dir, cfg.Push(src, addr, "img", rate)); err != nil {
		return rows, err
	}
	measured(ctx, &r, cfg.Push(src, addr, "img", rate), "wchar")
	return append(rows, r), nil
}

// settle makes the run start as the others do: the place's writes on disk,
// the caches dropped (unless kept), and the program's own binary read back
// into the cache (by running it once), so that only the run's own I/O is
// counted.
func (cfg BwlimitConfig) settle(ctx context.Context, dir string, argv []string) error {
	if err := syncFS(dir); err != nil {
		return err
	}
	if !cfg.KeepCaches {
		dropCaches()
	}
	return exec.CommandContext(ctx, argv[0], "version").Run()
}

// measured runs argv, sampling the kernel's count of field for its
// process every 100 ms, and fills r.
func measured(ctx context.Context, r *BwlimitRow, argv []string, field string) {
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	if err := cmd.Start(); err != nil {
		r.Error = err.Error()
		return
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	samples := []ioSample{{0, 0}}
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case err := <-done:
			r.Seconds = time.Since(start).Seconds()
			if err != nil {
				r.Error = fmt.Sprintf("%s: %v: %s", strings.Join(argv, " "), err, firstLine(out.Bytes()))
				return
			}
			r.Bytes = samples[len(samples)-1].n
			r.Windows = windowRatios(samples, r.Rate)
			r.summarize()
			return
		case <-tick.C:
			if n, err := procIO(cmd.Process.Pid, field); err == nil {
				samples = append(samples, ioSample{time.Since(start), n})
			}
		}
	}
}

// procIO reads one counter of /proc/PID/io.
func procIO(pid int, field string) (int64, error) {
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/io")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), field+": "); ok {
			return strconv.ParseInt(v, 10, 64)
		}
	}
	return 0, fmt.Errorf("/proc/%d/io: no %s", pid, field)
}

// rewriteOnePercent rewrites 1% of the data's 4 KiB blocks of path.
func rewriteOnePercent(path string, l patternfile.Layout) error {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	rng := rand.New(rand.NewPCG(7, 7))
	b := bytes.Repeat([]byte{0x5a}, 4096)
	blocks := int64(0)
	for _, x := range l.Data {
		blocks += x.Len / 4096
	}
	for range max(blocks/100, 1) {
		x := l.Data[rng.IntN(len(l.Data))]
		if _, err := f.WriteAt(b, x.Off+rng.Int64N(x.Len/4096)*4096); err != nil {
			return err
		}
	}
	return f.Sync()
}

// startServe starts a server that binds its own port and says its address
// on stderr: the address is read from there, never chosen before the bind.
func startServe(ctx context.Context, argv []string) (*exec.Cmd, string, error) {
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	pr, pw, err := os.Pipe()
	if err != nil {
		return nil, "", err
	}
	cmd.Stderr = pw
	if err := cmd.Start(); err != nil {
		pr.Close()
		pw.Close()
		return nil, "", err
	}
	pw.Close()
	found := make(chan string, 1)
	// Compiled here, not at package initialisation: every sparsesync
	// process would pay for it.
	servingRE := regexp.MustCompile(`serving .* on (\S+)`)
	go func() {
		defer pr.Close()
		sc := bufio.NewScanner(pr)
		sent := false
		for sc.Scan() { // read to the end, so the server never blocks on stderr
			if m := servingRE.FindStringSubmatch(sc.Text()); m != nil && !sent {
				found <- m[1]
				sent = true
			}
		}
		if !sent {
			close(found)
		}
	}()
	select {
	case addr, ok := <-found:
		if ok {
			return cmd, addr, nil
		}
	case <-ctx.Done():
	}
	_ = cmd.Process.Kill()
	err = cmd.Wait()
	return nil, "", errors.Join(fmt.Errorf("%s: no address announced", strings.Join(argv, " ")), err, ctx.Err())
}
