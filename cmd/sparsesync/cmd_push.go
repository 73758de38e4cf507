package main

import (
	"context"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/sparsesync/sparsesync/internal/bytesize"
	"github.com/sparsesync/sparsesync/replica"
	"github.com/sparsesync/sparsesync/tcpsync"
)

// netOptions are the flags push and pull share.
type netOptions struct {
	tokenFile   string
	noAuth      bool
	tlsCA       string
	tlsPin      string
	tlsName     string
	compress    string
	atomic      bool
	fullCompare bool
	readBack    string
	blockSize   int
	retries     int
	json        bool
	progress    string
	qos         qosFlags
}

func (o *netOptions) register(f *pflag.FlagSet) {
	f.StringVar(&o.tokenFile, "token-file", "", "file holding the shared token (mode 0600, at least 32 random bytes)")
	f.BoolVar(&o.noAuth, "no-auth", false, "talk to a server started with --no-auth (loopback only)")
	f.StringVar(&o.tlsCA, "tls-ca", "", "use TLS 1.3 and verify the server against this CA (PEM)")
	f.StringVar(&o.tlsPin, "tls-pin", "", "use TLS 1.3 and accept only the server certificate with this SHA-256 (hex)")
	f.StringVar(&o.tlsName, "tls-server-name", "", "server name to verify with --tls-ca (default: the host of ADDR)")
	f.StringVar(&o.compress, "compress", "auto", "compression of data: auto, none, lz4 or zstd")
	f.BoolVar(&o.atomic, "atomic", false, "write a temporary file and rename it over the target at the end")
	f.BoolVar(&o.fullCompare, "full-compare", false, "compare every block even if the receiver recorded this source version")
	f.StringVar(&o.readBack, "read-back", "auto", "read the target back from storage after the final fdatasync and check it whole: auto (with --atomic), on or off")
	f.IntVar(&o.blockSize, "block-size", 4096, "compare granularity in bytes (power of two, 4096 to 1048576)")
	f.IntVar(&o.retries, "retries", 5, "retries after a dropped connection or a timeout, each announced on stderr (0: none)")
	o.qos.registerTransfer(f, &o.json, &o.progress)
}

// clientOptions turns the flags into library options.
func (o *netOptions) clientOptions(addr string) (*tcpsync.Options, error) {
	if err := checkAddr("ADDR", addr); err != nil {
		return nil, err
	}
	c, err := tcpsync.ParseCompression(o.compress)
	if err != nil {
		return nil, usageError{err}
	}
	rb, err := tcpsync.ParseReadBack(o.readBack)
	if err != nil {
		return nil, usageError{err}
	}
	budget, _, err := o.qos.budget()
	if err != nil {
		return nil, err
	}
	opts := &tcpsync.Options{Compress: c, Atomic: o.atomic, FullCompare: o.fullCompare, ReadBack: rb, BlockSize: o.blockSize,
		MaxAttempts: max(o.retries, 0) + 1, NoAuth: o.noAuth, Progress: new(tcpsync.Progress), Budget: budget}
	switch {
	case o.noAuth && o.tokenFile != "":
		return nil, usageError{errors.New("--no-auth and --token-file are exclusive")}
	case !o.noAuth && o.tokenFile == "":
		return nil, usageError{errors.New("--token-file is required (or --no-auth for a loopback server)")}
	case o.tokenFile != "":
		if opts.Token, err = tcpsync.LoadToken(o.tokenFile); err != nil {
			return nil, err
		}
	}
	switch {
	case o.tlsCA != "" && o.tlsPin != "":
		return nil, usageError{errors.New("--tls-ca and --tls-pin are exclusive")}
	case o.tlsPin != "":
		pin, err := hex.DecodeString(o.tlsPin)
		if err != nil || len(pin) != 32 {
			return nil, usageError{fmt.Errorf("--tls-pin %q is not a hex SHA-256", o.tlsPin)}
		}
		opts.TLSConfig = tcpsync.PinnedTLS(pin)
	case o.tlsCA != "":
		pem, err := os.ReadFile(o.tlsCA)
		if err != nil {
			return nil, err
		}
		name := o.tlsName
		if name == "" {
			if name, _, err = net.SplitHostPort(addr); err != nil {
				return nil, usageError{fmt.Errorf("address %q: %w", addr, err)}
			}
		}
		var cfg *tls.Config
		if cfg, err = tcpsync.CATLS(pem, name); err != nil {
			return nil, fmt.Errorf("%s: %w", o.tlsCA, err)
		}
		opts.TLSConfig = cfg
	}
	return opts, nil
}

func newPushCommand(g *globalOpts) *cobra.Command {
	opts := netOptions{}
	var replicaDir string
	cmd := &cobra.Command{
		Use:   "push [flags] SRC ADDR REMOTE | push --replica DIR [flags] ADDR REMOTE",
		Short: "Send a sparse file to a sparsesync server, only what differs",
		Long: `Send the local file SRC to REMOTE (a path relative to the server's --root)
on the server at ADDR (host:port). Only data the server lacks travels:
holes are never read or sent, blocks both sides hold are compared by
seeded hashes, all-zero blocks become holes. The result is verified end
to end; a dropped connection or a timeout is retried (--retries), each
retry announced on stderr, and resumes where it stopped; a permanent
error (nothing listening, unknown host, TLS or pin failure, wrong token)
fails at once. Missing directories of REMOTE are created beneath the
server's root (like rsync --mkpath).

The server keeps REMOTE.tcpsync next to the target after success, on
purpose: it records the source version the target holds, so pushing an
unchanged source again ends after one round trip (--full-compare ignores
it). Deleting it is harmless: the next push compares every block.

With --replica DIR the source is the volume held by the replica
directory DIR (ours or Longhorn's, not open by a writer): its head merged
with its snapshot chain, the newest layer winning per 4 KiB block, sent
as one sparse image without exporting it first.

--json prints one object {"src", "dst", "size", "data_bytes",
"copied_bytes", "unchanged_bytes", "punched_bytes", "wire_bytes_sent",
"wire_bytes_received", "seconds", "verified", "read_back", "bwlimit",
"throttled_seconds"}. --read-back on (the default with --atomic) has the
server read the target back from storage after its fdatasync and check
it whole against the source.

--bwlimit RATE bounds, each on its own, what this side reads from
storage (SRC, or the replica's chain) and what it sends and receives on
the network; the server's own limit (serve --bwlimit) applies on its
side too. "throttled_seconds" is how long this side waited on it.
--ionice sets this process's I/O priority.
` + exitCodesHelp,
		Args: func(cmd *cobra.Command, args []string) error {
			if replicaDir != "" {
				return exactArgs(2)(cmd, args)
			}
			return exactArgs(3)(cmd, args)
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := opts.qos.check(); err != nil {
				return err // a bad flag before any file is opened
			}
			if replicaDir != "" {
				return runPushReplica(cmd.Context(), g, opts, replicaDir, args[0], args[1])
			}
			return runPush(cmd.Context(), g, opts, args[0], args[1], args[2])
		},
	}
	opts.register(cmd.Flags())
	cmd.Flags().StringVar(&replicaDir, "replica", "", "send the volume of this replica directory (head + snapshot chain)")
	return cmd
}

// runPushReplica sends the merged chain of a replica directory.
func runPushReplica(ctx context.Context, g *globalOpts, opts netOptions, dir, addr, remote string) error {
	c, err := replica.OpenChain(dir)
	if err != nil {
		return fmt.Errorf("push --replica %s: %w", dir, err)
	}
	defer c.Close()
	st, err := transfer(g, opts, addr, "push", func(co *tcpsync.Options, _ func(string)) (tcpsync.Stats, error) {
		return tcpsync.Push(ctx, addr, c, remote, co)
	})
	if err != nil {
		return fmt.Errorf("push --replica %s to %s %s: %w", dir, addr, remote, err)
	}
	return printResult(g, opts, "pushed", dir, "tcp://"+addr+"/"+remote, st)
}

func runPush(ctx context.Context, g *globalOpts, opts netOptions, src, addr, remote string) error {
	if strings.HasSuffix(remote, "/") {
		remote += filepath.Base(src) // like rsync: a remote directory gets SRC's name
	}
	var prog *tcpsync.Progress
	st, err := transfer(g, opts, addr, "push", func(co *tcpsync.Options, _ func(string)) (tcpsync.Stats, error) {
		prog = co.Progress
		return tcpsync.PushFile(ctx, addr, src, remote, co)
	})
	if errors.Is(err, tcpsync.ErrBadPath) {
		return usageError{fmt.Errorf("push %s to %s %s: %w", src, addr, remote, err)} // a bad argument: exit 2
	}
	if err != nil {
		started := prog != nil && prog.Done.Load() > 0
		return remotePartial(fmt.Errorf("push %s to %s %s: %w", src, addr, remote, err), remote, opts.atomic, started)
	}
	return printResult(g, opts, "pushed", src, "tcp://"+addr+"/"+remote, st)
}

// transfer builds the client options from the flags, draws the progress bar
// when asked, and runs one push or pull with them.
// run gets the client options and say, which prints a line above the
// progress bar (for what the library reports while it runs).
func transfer(g *globalOpts, opts netOptions, addr, label string, run func(co *tcpsync.Options, say func(string)) (tcpsync.Stats, error)) (tcpsync.Stats, error) {
	co, err := opts.clientOptions(addr)
	if err != nil {
		return tcpsync.Stats{}, err
	}
	bar, err := g.startBar(opts.progress, label, 0, func() sampleFunc { return progressOf(co.Progress) })
	if err != nil {
		return tcpsync.Stats{}, err
	}
	co.OnRetry = func(attempt, maxAttempts int, delay time.Duration, err error) {
		bar.Println(g.stderr, fmt.Sprintf("sparsesync: %s: retrying in %s (attempt %d/%d): %s",
			label, roundDelay(delay), attempt, maxAttempts, causeText(err)))
	}
	st, err := run(co, func(line string) { bar.Println(g.stderr, line) })
	bar.Stop()
	return st, err
}

// roundDelay renders a backoff the way a user reads it: 2s, 500ms.
func roundDelay(d time.Duration) time.Duration {
	if d >= time.Second {
		return d.Round(time.Second)
	}
	return d.Round(10 * time.Millisecond)
}

// causeText is the root cause of a failed attempt in a user's words:
// "connection reset by peer", "connection closed by the server".
func causeText(err error) string {
	var errno syscall.Errno
	var ne net.Error
	switch {
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "connection closed by the peer"
	case errors.As(err, &errno):
		return errno.Error()
	case errors.As(err, &ne) && ne.Timeout():
		return "timed out"
	}
	return strings.TrimPrefix(errorLine(err), "sparsesync: ")
}

func progressOf(p *tcpsync.Progress) func() (int64, int64, int64) {
	return func() (int64, int64, int64) { return p.Done.Load(), p.Total.Load(), p.Wire.Load() }
}

type syncResult struct {
	Src               string  `json:"src"`
	Dst               string  `json:"dst"`
	Size              int64   `json:"size"`
	DataBytes         int64   `json:"data_bytes"`
	CopiedBytes       int64   `json:"copied_bytes"`
	UnchangedBytes    int64   `json:"unchanged_bytes"`
	PunchedBytes      int64   `json:"punched_bytes"`
	WireBytesSent     int64   `json:"wire_bytes_sent"`
	WireBytesReceived int64   `json:"wire_bytes_received"`
	Seconds           float64 `json:"seconds"`
	Verified          bool    `json:"verified"`
	ReadBack          bool    `json:"read_back"`
	Bwlimit           int64   `json:"bwlimit"`
	ThrottledSecs     float64 `json:"throttled_seconds"`
}

func printResult(g *globalOpts, opts netOptions, verb, src, dst string, st tcpsync.Stats) error {
	if opts.json {
		return writeJSONLine(g.stdout, syncResult{Src: src, Dst: dst, Size: st.Size, DataBytes: st.DataBytes,
			CopiedBytes: st.CopiedBytes, UnchangedBytes: st.UnchangedBytes, PunchedBytes: st.PunchedBytes,
			WireBytesSent: st.WireBytesSent, WireBytesReceived: st.WireBytesReceived, Seconds: st.Elapsed.Seconds(),
			Verified: st.Verified, ReadBack: st.ReadBack, Bwlimit: opts.qos.rate(), ThrottledSecs: st.Throttled.Seconds()})
	}
	how := "verified"
	if st.QuickCheck {
		how = "unchanged (quick check)"
	}
	if st.Throttled > 0 {
		how += fmt.Sprintf(", waited %.3fs on --bwlimit", st.Throttled.Seconds())
	}
	_, err := fmt.Fprintf(g.stdout, "%s %s to %s: %s data, %s copied, %s unchanged, %s punched; wire %s sent, %s received; %.2f s, %s\n",
		verb, src, dst, bytesize.Format(st.DataBytes), bytesize.Format(st.CopiedBytes), bytesize.Format(st.UnchangedBytes),
		bytesize.Format(st.PunchedBytes), bytesize.Format(st.WireBytesSent), bytesize.Format(st.WireBytesReceived), st.Elapsed.Seconds(), how)
	return err
}
