package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"

	"github.com/spf13/pflag"

	"github.com/sparsesync/sparsesync/internal/bytesize"
	"github.com/sparsesync/sparsesync/tcpsync"
)

const multiPullHelp = `
Several sources: --from ADDR/REMOTE (repeated; [::1]:7373/vm1/disk.img
for IPv6) fetches DST from every server at once. The sources first state
their content (size, data map, a SHA-256 per 4 MiB piece of data, which
costs each server one read of the file's data); those agreeing with the
largest group take part and the others are dropped and named on stderr;
no majority (two sources that disagree, say) fails with nothing written.
Pieces go to whichever source is free, each is checked before it is
written, and a source that fails, stalls or sends wrong data loses its
pieces to the others. --token-file serves every source; --from-token-file
(repeated, in the order of --from) gives each its own. --json adds
"sources": [{"source", "pieces", "copied_bytes", "zero_bytes",
"unchanged_bytes", "wire_bytes", "failures", "dropped"}]. --retries does
not apply: a failed source is dropped, and a rerun compares every block
and fetches only what is missing.
`

// multiFlags are pull's flags for several sources.
type multiFlags struct {
	from       []string
	tokenFiles []string
}

func (m *multiFlags) register(f *pflag.FlagSet) {
	f.StringArrayVar(&m.from, "from", nil, "a source ADDR/REMOTE (repeat for several; then the only argument is DST)")
	f.StringArrayVar(&m.tokenFiles, "from-token-file", nil, "the token file of each --from, in the same order (default: --token-file)")
}

// parseFrom splits ADDR/REMOTE at the first slash after the port.
func parseFrom(s string) (tcpsync.MultiSource, error) {
	i := strings.Index(s, "/")
	if i < 0 {
		return tcpsync.MultiSource{}, usageError{fmt.Errorf("--from %q: want ADDR/REMOTE", s)}
	}
	src := tcpsync.MultiSource{Addr: s[:i], Remote: s[i+1:]}
	if err := checkAddr("--from", src.Addr); err != nil {
		return src, err
	}
	if err := tcpsync.ValidateName(src.Remote); err != nil {
		return src, usageError{fmt.Errorf("--from %q: %w", s, err)}
	}
	return src, nil
}

type multiResult struct {
	syncResult
	Sources []tcpsync.SourceStats `json:"sources"`
}

func runPullMulti(ctx context.Context, g *globalOpts, opts netOptions, mf multiFlags, dst string) error {
	var sources []tcpsync.MultiSource
	for _, f := range mf.from {
		s, err := parseFrom(f)
		if err != nil {
			return err
		}
		sources = append(sources, s)
	}
	if len(mf.tokenFiles) > 0 {
		if len(mf.tokenFiles) != len(sources) {
			return usageError{fmt.Errorf("%d --from-token-file for %d --from", len(mf.tokenFiles), len(sources))}
		}
		if opts.noAuth {
			return usageError{errors.New("--no-auth and --from-token-file are exclusive")}
		}
		for i, p := range mf.tokenFiles {
			tok, err := tcpsync.LoadToken(p)
			if err != nil {
				return err
			}
			sources[i].Token = tok
		}
		if opts.tokenFile == "" {
			opts.tokenFile = mf.tokenFiles[0] // for the shared options; each source has its own
		}
	}
	dst = intoDir(dst, sources[0].Remote)
	var before dstState
	if !opts.atomic {
		before = statDst(dst)
	}
	var ms tcpsync.MultiStats
	drops := &dropLines{said: map[string]bool{}}
	_, err := transfer(g, opts, sources[0].Addr, "pull", func(co *tcpsync.Options, say func(string)) (tcpsync.Stats, error) {
		drops.say = say
		co.Logger = slog.New(drops)
		var err error
		ms, err = tcpsync.PullMulti(ctx, sources, dst, co)
		return ms.Stats, err
	})
	for _, s := range ms.Sources {
		if s.Dropped != "" && !drops.saw(s.Source) {
			fmt.Fprintf(g.stderr, "sparsesync: pull: source %s dropped: %s\n", s.Source, s.Dropped)
		}
	}
	if err != nil {
		return partial(fmt.Errorf("pull to %s from %d sources: %w", dst, len(sources), err), dst, before)
	}
	st := ms.Stats
	src := make([]string, len(sources))
	for i, s := range sources {
		src[i] = "tcp://" + s.String()
	}
	if opts.json {
		return writeJSONLine(g.stdout, multiResult{syncResult: syncResult{Src: strings.Join(src, ","), Dst: dst,
			Size: st.Size, DataBytes: st.DataBytes, CopiedBytes: st.CopiedBytes, UnchangedBytes: st.UnchangedBytes,
			PunchedBytes: st.PunchedBytes, WireBytesSent: st.WireBytesSent, WireBytesReceived: st.WireBytesReceived,
			Seconds: st.Elapsed.Seconds(), Verified: st.Verified, ReadBack: st.ReadBack, Bwlimit: opts.qos.rate(),
			ThrottledSecs: st.Throttled.Seconds()}, Sources: ms.Sources})
	}
	if err := printResult(g, opts, "pulled", strings.Join(src, ", "), dst, st); err != nil {
		return err
	}
	for _, s := range ms.Sources {
		state := "ok"
		if s.Dropped != "" {
			state = "dropped"
		}
		if _, err := fmt.Fprintf(g.stdout, "  %s: %d pieces, %s copied, %s unchanged, wire %s, %d failed pieces, %s\n",
			s.Source, s.Pieces, bytesize.Format(s.CopiedBytes), bytesize.Format(s.UnchangedBytes),
			bytesize.Format(s.WireBytes), s.Failures, state); err != nil {
			return err
		}
	}
	return nil
}

// dropLines says each source PullMulti drops the moment it does (its
// "source dropped" warning, with the source and why), above the progress
// bar, in the same words as the summary after the pull; it ignores every
// other record.
type dropLines struct {
	say  func(string)
	mu   sync.Mutex
	said map[string]bool
}

func (d *dropLines) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }

func (d *dropLines) Handle(_ context.Context, r slog.Record) error {
	var source, why string
	r.Attrs(func(a slog.Attr) bool {
		switch a.Key {
		case "source":
			source = a.Value.String()
		case "why":
			why = a.Value.String()
		}
		return true
	})
	if source == "" || why == "" {
		return nil
	}
	d.mu.Lock()
	d.said[source] = true
	d.mu.Unlock()
	d.say(fmt.Sprintf("sparsesync: pull: source %s dropped: %s", source, why))
	return nil
}

func (d *dropLines) WithAttrs([]slog.Attr) slog.Handler { return d }
func (d *dropLines) WithGroup(string) slog.Handler      { return d }

// saw reports whether source's drop was said while the pull ran.
func (d *dropLines) saw(source string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.said[source]
}
