package tcpsync

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"fmt"
	"os"
	"strings"
	"time"

	wtarget "github.com/sparsesync/sparsesync/internal/target"
	"github.com/sparsesync/sparsesync/internal/wire"
	"golang.org/x/sys/unix"
)

func (s *Server) session(ctx context.Context, cancel func(), tc *tracked, ev *SessionEvent, fp **framer) (Stats, error) {
	c := tc.c
	if s.TLSConfig != nil {
		// A plaintext client gets told, in plaintext, rather than a
		// close it would take for a busy server's and retry.
		pc, err := plaintextHello(ctx, c)
		if err != nil {
			return Stats{}, err
		}
		c = pc
		cfg := s.TLSConfig.Clone()
		cfg.MinVersion = tls.VersionTLS13
		tc := tls.Server(c, cfg)
		if err := tc.HandshakeContext(ctx); err != nil {
			return Stats{}, fmt.Errorf("TLS handshake: %w", err)
		}
		c = tc
	}
	f := newFramer(c)
	*fp = f
	defer f.cutOnDone(ctx)()
	f.preAuth, f.budget = true, wire.MaxPreAuth
	f.hmacOnly = s.hooks != nil && s.hooks.hmacOnly
	f.noBatch = s.hooks != nil && s.hooks.noBatch
	f.notBusy = s.hooks != nil && s.hooks.notBusy
	f.noWindows = s.hooks != nil && s.hooks.noWindows // tests: an older server, without windows or piece maps
	seed, err := serverHandshake(ctx, f, s.token(), s.NoAuth, s.FailDelay)
	if err != nil {
		return Stats{}, err
	}
	tc.authed = true
	f.preAuth = false

	// OPEN is due within the handshake deadline (still armed from accept):
	// an authenticated peer cannot hold a connection by saying nothing.
	_, body, err := f.expect(wire.Open)
	if err != nil {
		return Stats{}, err
	}
	if err := s.promote(tc); err != nil {
		return Stats{}, err
	}
	tc.opened = true
	_ = f.cc.SetDeadline(time.Time{}) // not undoing a cut
	f.setIdle(s.IdleTimeout)
	f.watch(startWatchdog(s.IdleTimeout, cancel))
	f.mem = &sessionMem{pool: &s.mem, host: tc.host, limit: s.MaxSessionMemory}
	defer f.mem.release()
	if err := f.limit(ctx, s.Budget); err != nil {
		return Stats{}, err
	}
	if err := f.mem.reserve(sessionFixed, "the session's buffers"); err != nil {
		return Stats{}, err
	}
	d := wire.Dec{B: body, T: wire.Open}
	op, flags, bs := d.U8(), d.U32(), d.U32()
	name := string(d.Bytes(2 * wire.MaxPath)) // longer names get ValidateName's error
	if err := d.End(); err != nil {
		return Stats{}, err
	}
	ev.Path = sanitize(name)
	p := syncParams{seed: seed, logger: s.Logger, fullCompare: flags&openFullCompare != 0, compress: CompressNone,
		cpBytes: s.CheckpointBytes, cpEvery: s.CheckpointInterval, readBack: flags&openReadBack != 0, hooks: s.hooks}
	switch op {
	case opPush:
		ev.Op = "push"
		t, err := s.openForWrite(ctx, name, flags&openAtomic != 0)
		if err != nil {
			return Stats{}, err
		}
		defer t.close()
		if err := f.send(wire.Opened, 0); err != nil {
			return Stats{}, err
		}
		return receiveTarget(ctx, f, t, p)
	case opPull:
		ev.Op = "pull"
		if !validBlockSize(bs) {
			return Stats{}, fmt.Errorf("%w: block size %d", ErrProtocol, bs)
		}
		p.bs = int64(bs)
		p.compress = Compression(flags >> 8 & 3)
		src, file, err := s.openForRead(ctx, name)
		if err != nil {
			return Stats{}, err
		}
		defer file.Close()
		if err := f.send(wire.Opened, 0); err != nil {
			return Stats{}, err
		}
		return sendSource(ctx, f, src, p)
	case opFetch:
		ev.Op = "fetch"
		return s.serveFetch(ctx, f, name, bs)
	case opList:
		ev.Op = "list"
		body, err := s.listDir(ctx, name)
		if err != nil {
			return Stats{}, err
		}
		return Stats{}, f.send(wire.Opened, 0, body)
	}
	return Stats{}, fmt.Errorf("%w: unknown operation %d", ErrProtocol, op)
}

// ValidateName checks a remote name before it is resolved: a clean relative
// path of at most 4096 bytes and 64 components (maxDepth), components of
// at most 255 bytes, no empty,
// "." or ".." components, no NUL or control characters, and not one of the
// names tcpsync keeps next to targets.
func ValidateName(name string) error {
	bad := func(why string) error {
		shown := name
		if len(shown) > 128 { // the reason must survive the error text's 1 KiB bound
			shown = shown[:128] + "…"
		}
		return fmt.Errorf("%w: %q: %s", ErrBadPath, sanitize(shown), why)
	}
	switch {
	case name == "":
		return bad("empty")
	case len(name) > wire.MaxPath:
		return bad("longer than 4096 bytes")
	case strings.HasPrefix(name, "/"):
		return bad("absolute")
	case strings.HasSuffix(name, sidecarSuffix) || strings.HasSuffix(name, tmpSuffix) || strings.HasSuffix(name, sidecarSuffix+".new"):
		return bad("reserved suffix")
	}
	for _, r := range name {
		if r < 0x20 || r == 0x7f {
			return bad("control character")
		}
	}
	if strings.Count(name, "/") >= maxDepth {
		return bad(fmt.Sprintf("more than %d components", maxDepth))
	}
	for comp := range strings.SplitSeq(name, "/") {
		switch {
		case comp == "":
			return bad("empty component")
		case comp == "." || comp == "..":
			return bad("dot component")
		case len(comp) > wire.MaxComponent:
			return bad("component longer than 255 bytes")
		}
	}
	return nil
}

// openForWrite opens the target of a push, creating its missing
// directories; a refused OPEN leaves none of them behind.
func (s *Server) openForWrite(ctx context.Context, name string, atomic bool) (*target, error) {
	if err := ValidateName(name); err != nil {
		return nil, err
	}
	w, err := s.walkDirs(ctx, name, true)
	if err != nil {
		return nil, err
	}
	t, err := openTarget(s.root, name, sanitize(name), atomic, s.faults)
	if err != nil {
		w.undo(s)
		return nil, err
	}
	return t, nil
}

func (s *Server) openForRead(ctx context.Context, name string) (*FileSource, *os.File, error) {
	if err := ValidateName(name); err != nil {
		return nil, nil, err
	}
	if _, err := s.walkDirs(ctx, name, false); err != nil {
		return nil, nil, err
	}
	f, err := wtarget.OpenNoFollow(s.root, name, os.O_RDONLY|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, nil, pathErr(sanitize(name), err)
	}
	st, err := f.Stat()
	if err != nil || !st.Mode().IsRegular() {
		f.Close()
		return nil, nil, fmt.Errorf("%w: %q", ErrNotRegular, sanitize(name))
	}
	if err := singleLink(f, sanitize(name)); err != nil {
		f.Close()
		return nil, nil, err
	}
	src, err := NewFileSource(f)
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return src, f, nil
}

func openBody(op uint8, flags uint32, bs uint32, name string) []byte {
	b := []byte{op}
	b = binary.LittleEndian.AppendUint32(b, flags)
	b = binary.LittleEndian.AppendUint32(b, bs)
	return wire.AppendBytes(b, []byte(name))
}
