package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/sparsesync/sparsesync/internal/bytesize"
	"github.com/sparsesync/sparsesync/replica/rebuild"
	"github.com/sparsesync/sparsesync/tcpsync"
)

type replicaRebuildOptions struct {
	remote    string
	remoteDir string
	tokenFile string
	noAuth    bool
	noLocal   bool
	retries   int
	json      bool
	progress  string
	qos       qosFlags

	// moreRemotes are the second and later --remote ADDR/DIR.
	moreRemotes []string
}

func newReplicaRebuildCommand(g *globalOpts) *cobra.Command {
	opts := replicaRebuildOptions{}
	cmd := &cobra.Command{
		Use:   "rebuild [--remote ADDR --token-file F] [--json] SOURCE-DIR TARGET-DIR",
		Short: "Rebuild a replica directory from another one: local first, TCP fallback",
		Long: `Make TARGET-DIR an identical replica of SOURCE-DIR (which must not be written
meanwhile). Each file is copied locally first (reflinks where the
filesystem can, else copy_file_range or read/write, writing only what
differs from an older copy in TARGET-DIR) and verified. If a local step
fails, the files the local attempt created are removed, a warning is
printed and the copy is made over TCP from the sparsesync server at
--remote, which serves SOURCE-DIR as --remote-dir beneath its root
(default: the last element of SOURCE-DIR). With --no-local the source is
not on this machine and the copy goes straight to TCP.

TARGET-DIR is marked rebuilding in volume.meta until every file is copied,
verified and synced, and gets the source's revision counter at the end; an
interrupted rebuild leaves a directory that does not open, and running the
command again completes it.

--json prints one object {"source", "target", "path": "local"|"tcp"|"local+tcp",
"files": [{"name", "copied_bytes", "cloned_bytes", "unchanged_bytes"}],
"seconds", "fallback_reason", "revision", "bwlimit", "throttled_seconds"};
"revision" is the target's revision counter, null for a replica that keeps
none (counter off).

--bwlimit RATE caps the rebuild: what it reads from storage (the source
and, for a re-sync, the target), what it writes and, on the TCP path, what
it sends and receives, each to RATE on its own. "throttled_seconds" is how
long it waited on that limit. --ionice sets its I/O priority.
` + rebuildMoreRemotesHelp + exitCodesHelp,
		Args: exactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runReplicaRebuild(cmd.Context(), g, opts, args[0], args[1])
		},
	}
	f := cmd.Flags()
	f.Var(&remotesFlag{first: &opts.remote, firstDir: &opts.remoteDir, more: &opts.moreRemotes}, "remote", "sparsesync server (host:port) serving the source, for the TCP path; repeat as ADDR/DIR for more healthy copies")
	f.StringVar(&opts.remoteDir, "remote-dir", "", "the source directory's name beneath the server's root (default: base name of SOURCE-DIR)")
	f.StringVar(&opts.tokenFile, "token-file", "", "file holding the server's shared token")
	f.BoolVar(&opts.noAuth, "no-auth", false, "talk to a server started with --no-auth (loopback only)")
	f.BoolVar(&opts.noLocal, "no-local", false, "the source is not on this machine: copy over TCP only")
	f.IntVar(&opts.retries, "retries", 5, "retries of a dropped connection or a timeout per file (0: none)")
	opts.qos.registerTransfer(f, &opts.json, &opts.progress)
	return cmd
}

type rebuildFileJSON struct {
	Name           string `json:"name"`
	CopiedBytes    int64  `json:"copied_bytes"`
	ClonedBytes    int64  `json:"cloned_bytes"`
	UnchangedBytes int64  `json:"unchanged_bytes"`
}

type replicaRebuildResult struct {
	Source         string            `json:"source"`
	Target         string            `json:"target"`
	Path           string            `json:"path"`
	Files          []rebuildFileJSON `json:"files"`
	Seconds        float64           `json:"seconds"`
	FallbackReason string            `json:"fallback_reason"`
	// Revision is the target's revision counter, null for a replica that
	// keeps none (counter off).
	Revision      *int64  `json:"revision"`
	Bwlimit       int64   `json:"bwlimit"`
	ThrottledSecs float64 `json:"throttled_seconds"`
}

func runReplicaRebuild(ctx context.Context, g *globalOpts, opts replicaRebuildOptions, source, target string) error {
	ro := &rebuild.Options{Remote: opts.remote, RemoteDir: opts.remoteDir,
		Logger: newLineLogger(g.stderr, slog.LevelWarn)}
	if ro.RemoteDir == "" {
		ro.RemoteDir = baseName(source)
	}
	switch {
	case opts.remote == "" && opts.noLocal:
		return usageError{fmt.Errorf("replica rebuild: --no-local needs --remote")}
	case opts.remote != "" && opts.noAuth && opts.tokenFile != "":
		return usageError{fmt.Errorf("replica rebuild: --no-auth and --token-file are exclusive")}
	case opts.remote != "" && !opts.noAuth && opts.tokenFile == "":
		return usageError{fmt.Errorf("replica rebuild: --remote needs --token-file (or --no-auth for a loopback server)")}
	case opts.remote == "" && (opts.tokenFile != "" || opts.noAuth):
		return usageError{fmt.Errorf("replica rebuild: --token-file and --no-auth need --remote")}
	}
	if opts.remote != "" {
		if err := checkAddr("replica rebuild: --remote", opts.remote); err != nil {
			return err
		}
	}
	more, err := moreRemotes(opts.moreRemotes, ro.RemoteDir)
	if err != nil {
		return err
	}
	ro.MoreRemotes = more
	budget, rate, err := opts.qos.budget()
	if err != nil {
		return err
	}
	ro.Budget = budget
	ro.TCP.NoAuth = opts.noAuth
	ro.TCP.MaxAttempts = max(opts.retries, 0) + 1
	ro.TCP.Logger = ro.Logger
	if opts.tokenFile != "" {
		tok, err := tcpsync.LoadToken(opts.tokenFile)
		if err != nil {
			return fmt.Errorf("replica rebuild: %w", err)
		}
		ro.TCP.Token = tok
	}
	local := source
	if opts.noLocal {
		local = ""
	}
	bar, err := g.startBar(opts.progress, "rebuild", g.delay(time.Second), func() sampleFunc {
		if opts.noLocal {
			return nil // no local source to measure against
		}
		// The target's files grow towards the source's allocated bytes.
		return fileSampler(dirAllocated(source, nil), func() int64 { return dirAllocated(target, nil) })
	})
	if err != nil {
		return err
	}
	if bar != nil {
		ro.Logger = newLineLogger(barWriter{bar, g.stderr}, slog.LevelWarn)
	}
	_, statErr := os.Lstat(target)
	st, err := rebuild.Rebuild(ctx, local, target, ro)
	bar.Stop()
	if err != nil {
		if errors.Is(statErr, fs.ErrNotExist) {
			// A target this command made and left empty (interrupted, out
			// of space) is removed: nothing half made stays behind. One
			// that holds anything is kept (os.Remove refuses it).
			_ = os.Remove(target)
		}
		return fmt.Errorf("replica rebuild: %w", err)
	}
	var throttled time.Duration
	for _, f := range st.Files {
		throttled += f.Throttled
	}
	if opts.json {
		res := replicaRebuildResult{Source: source, Target: target, Path: st.Path, Files: []rebuildFileJSON{},
			Seconds: st.Elapsed.Seconds(), FallbackReason: st.FallbackReason, Bwlimit: rate, ThrottledSecs: throttled.Seconds()}
		if st.Counter.Enabled() {
			res.Revision = &st.Revision
		}
		for _, f := range st.Files {
			res.Files = append(res.Files, rebuildFileJSON{Name: f.Name, CopiedBytes: f.CopiedBytes, ClonedBytes: f.ClonedBytes, UnchangedBytes: f.UnchangedBytes})
		}
		return writeJSONLine(g.stdout, res)
	}
	var copied, cloned, unchanged int64
	for _, f := range st.Files {
		copied, cloned, unchanged = copied+f.CopiedBytes, cloned+f.ClonedBytes, unchanged+f.UnchangedBytes
	}
	revision := "no revision counter"
	if st.Counter.Enabled() {
		revision = fmt.Sprintf("revision %d", st.Revision)
	}
	if throttled > 0 {
		revision += fmt.Sprintf(", waited %.3fs on --bwlimit", throttled.Seconds())
	}
	_, err = fmt.Fprintf(g.stdout, "rebuilt %s from %s (%s): %d files, %s copied, %s cloned, %s unchanged, %s, %.2f s\n",
		target, source, st.Path, len(st.Files), bytesize.Format(copied), bytesize.Format(cloned), bytesize.Format(unchanged), revision, st.Elapsed.Seconds())
	return err // a fallback to TCP was said on stderr as it happened
}

func baseName(p string) string {
	for len(p) > 1 && p[len(p)-1] == '/' {
		p = p[:len(p)-1]
	}
	for i := len(p) - 1; i >= 0; i-- {
		if p[i] == '/' {
			return p[i+1:]
		}
	}
	return p
}

// barWriter writes log lines above the progress bar.
type barWriter struct {
	bar *progressBar
	w   io.Writer
}

func (b barWriter) Write(p []byte) (int, error) {
	b.bar.Println(b.w, strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}
