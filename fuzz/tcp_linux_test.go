package fuzz

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/sparsesync/sparsesync/tcpsync"
)

// server is an in-process tcpsync server on 127.0.0.1 rooted on a scratch
// filesystem.
type server struct {
	fs   fsys
	root string
	addr string
}

// startServers starts one server per filesystem for the life of the target.
func startServers(f *testing.F, fss []fsys) []server {
	f.Helper()
	var out []server
	for _, fs := range fss {
		root := filepath.Join(fs.dir, "root")
		if err := os.Mkdir(root, 0o755); err != nil {
			f.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		addr, wait, err := tcpsync.ServeLoopback(ctx, &tcpsync.Server{Root: root, NoAuth: true})
		if err != nil {
			cancel()
			f.Fatal(err)
		}
		f.Cleanup(func() {
			cancel()
			if err := wait(); err != nil {
				f.Errorf("server on %s: %v", fs.kind, err)
			}
		})
		out = append(out, server{fs, root, addr})
	}
	return out
}

// tcpRun is one way of moving a case over the network.
type tcpRun struct {
	pull bool
	opts tcpsync.Options
}

func (r tcpRun) String() string {
	dir := "push"
	if r.pull {
		dir = "pull"
	}
	return fmt.Sprintf("%s compress=%v bs=%d atomic=%v", dir, r.opts.Compress, r.opts.BlockSize, r.opts.Atomic)
}

// tcpRuns: both directions and every compression; the case's knobs pick
// the block size (bit 0: 64 KiB) and atomic mode (bit 1).
func tcpRuns(c fcase) []tcpRun {
	var out []tcpRun
	for _, pull := range []bool{false, true} {
		for _, comp := range []tcpsync.Compression{tcpsync.CompressNone, tcpsync.CompressLZ4, tcpsync.CompressZstd} {
			o := tcpsync.Options{NoAuth: true, MaxAttempts: 1, Compress: comp, Atomic: c.Knobs&2 != 0}
			if c.Knobs&1 != 0 {
				o.BlockSize = 64 << 10
			}
			out = append(out, tcpRun{pull, o})
		}
	}
	return out
}

// FuzzTCP runs a case through tcpsync push and pull over loopback (every
// direction and compression; one, chosen by the input, when fuzzing): a sync
// onto the destination (new or existing), an unchanged re-sync with a full
// block compare that must write nothing, and a re-sync after the change
// script.
func FuzzTCP(f *testing.F) {
	srvs := startServers(f, filesystems(f))
	f.Fuzz(func(t *testing.T, in []byte) {
		c := decode(in)
		for _, srv := range srvs {
			for _, run := range pick(tcpRuns(c), c) {
				tcpCase(t, srv, c, run)
			}
		}
	})
}

func tcpCase(t *testing.T, srv server, c fcase, run tcpRun) {
	local := scratch(t, srv.fs)
	remoteDir, err := os.MkdirTemp(srv.root, "case-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(remoteDir) })
	third := makeThird(t, local)
	rel := filepath.Join(filepath.Base(remoteDir), "img")
	// src is the file read, dst the file written, whichever side holds them.
	src, dst := filepath.Join(local, "img"), filepath.Join(remoteDir, "img")
	if run.pull {
		src, dst = dst, src
	}
	build(t, src, c.Size, c.Src, third)
	if c.HasDst {
		build(t, dst, c.DstSize, c.Dst, third)
	}
	what := func(step string) string { return fmt.Sprintf("%s %s %v\n\tcase %v", srv.fs.kind, step, run, c) }
	sync := func(step string, o tcpsync.Options) tcpsync.Stats {
		t.Helper()
		var st tcpsync.Stats
		var err error
		if run.pull {
			st, err = tcpsync.Pull(t.Context(), srv.addr, rel, dst, &o)
		} else {
			st, err = tcpsync.PushFile(t.Context(), srv.addr, src, rel, &o)
		}
		if err != nil {
			t.Fatalf("%s: %v", what(step), err)
		}
		if !st.Verified {
			t.Fatalf("%s: not verified: %+v", what(step), st)
		}
		checkResult(t, what(step), src, dst, rules{})
		return st
	}

	sync("sync", run.opts)

	if !run.opts.Atomic {
		markUntouched(t, dst)
		o := run.opts
		o.FullCompare = true
		st := sync("unchanged re-sync", o)
		if st.CopiedBytes != 0 || st.PunchedBytes != 0 || touched(t, dst) {
			t.Fatalf("%s: an unchanged re-sync wrote (stats %+v, mtime moved %v)", what("unchanged re-sync"), st, touched(t, dst))
		}
	}

	if len(c.Change) > 0 {
		change(t, src, c.Change, third)
		sync("re-sync after change", run.opts)
	}
}
