package tcpsync

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sparsesync/sparsesync/internal/wire"
)

// claimMap is a claimer's map: 2^20 extents, about 2 MiB. It is built
// before the session opens (once for all claimers): built after OPENED,
// under -race and load, it kept the claimer silent for up to 1.5 s of
// the 2 s idle timeout before its SRCINFO, and past it the server's idle
// read deadline could end the session before its watchdog called it
// stalled.
var claimMap = sync.OnceValue(func() []byte { return encodedMap(2*wire.MaxExtents, wire.MaxExtents) })

// claimer opens a push from 127.0.0.<host> whose SRCINFO and first,
// non-final EXTENTS frame claim 2^20 extents, then trickles one more full
// frame every period until the server ends the session or stop closes.
// It reports the error that ended it.
func claimer(ctx context.Context, addr string, host int, name string, period time.Duration, opened chan<- struct{}) error {
	m := claimMap()
	c, err := dialFrom(ctx, host, addr)
	if err != nil {
		return err
	}
	defer c.Close()
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer stop()
	f := newFramer(c)
	f.noWindows = true // it speaks whole maps, without windows
	if _, err := clientHandshake(ctx, f, testToken, false); err != nil {
		return err
	}
	if err := f.send(wire.Open, 0, openBody(opPush, 0, 4096, name)); err != nil {
		return err
	}
	if _, _, err := f.expect(wire.Opened); err != nil {
		return err
	}
	if err := f.writeFrame(wire.SrcInfo, 0, srcInfoBody(2*wire.MaxExtents, 4096, "")); err != nil {
		return err
	}
	// The server answers only with an ERROR: read it on the side.
	ended := make(chan error, 1)
	go func() {
		_, _, err := f.expect(wire.DstInfo)
		ended <- err
	}()
	for i := 0; ; i++ {
		if (i+1)*wire.MaxFrame >= len(m) {
			return errors.New("claimer: the map ran out before the server ended the session")
		}
		if err := f.send(wire.Extents, 0, m[i*wire.MaxFrame:(i+1)*wire.MaxFrame]); err != nil {
			return <-ended
		}
		if i == 0 {
			opened <- struct{}{}
		}
		select {
		case err := <-ended:
			return err
		case <-time.After(period):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// TestClaimsCannotLockOut is hole 2: from one address, 7 push sessions
// each send SRCINFO and a first, non-final 64 KiB EXTENTS frame claiming
// 2^20 extents, then one more such frame per period. The map budget was
// reserved from the claimed count (about 148 MiB a session: 7 of them
// took the whole 1 GiB), and the trickle counted as progress, so every
// other push was refused as busy for hours. Now a session is charged for
// the bytes that arrived (about 4.6 MiB per 64 KiB frame), one address
// holds at most its share of the budget, and map frames are no progress:
// all 7 are held while a legitimate push from another address succeeds,
// and each ends as stalled after the idle timeout.
func TestClaimsCannotLockOut(t *testing.T) {
	t.Parallel() // it waits on idle timeouts: beside the other waiting tests
	root, local := t.TempDir(), t.TempDir()
	const idle = 2 * time.Second
	addr, srv := startServer(t, root, func(s *Server) { s.IdleTimeout = idle })
	ends := sessionEnds(srv)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()

	opened := make(chan struct{}, 7)
	errs := make([]error, 7)
	var wg sync.WaitGroup
	for i := range 7 {
		wg.Go(func() { errs[i] = claimer(ctx, addr, 2, fmt.Sprint("claim", i), idle/4, opened) })
	}
	for range 7 {
		select {
		case <-opened:
		case <-ctx.Done():
			t.Fatal("the claiming sessions did not start")
		}
	}
	src := filepath.Join(local, "src")
	require.NoError(t, writeImage(src, 8<<20, 0.5, 8, 3))
	o := clientOpts()
	o.Dial = func(ctx context.Context, _, a string) (net.Conn, error) { return dialFrom(ctx, 1, a) }
	start := time.Now()
	st, err := PushFile(ctx, addr, src, "legit", o)
	require.NoError(t, err, "a legitimate push while 7 sessions claim 2^20 extents each")
	t.Logf("legitimate push: %v, %d attempt(s)", time.Since(start), st.Attempts)
	requireSame(t, src, filepath.Join(root, "legit"))

	// The claimers end as stalled (not busy: each got in), within a
	// bound that is many idle timeouts (a hang, not a timing).
	wg.Wait()
	for i, err := range errs {
		require.ErrorIs(t, err, ErrStalled, "claimer %d", i)
	}
	evs := waitSessions(t, ends, 8, time.Minute)
	stalled := 0
	for _, ev := range evs {
		if ev.Path != "legit" {
			require.ErrorIs(t, ev.Err, ErrStalled, ev.Path)
			stalled++
		}
	}
	require.Equal(t, 7, stalled)
}

// TestMemoryShareLimitsOneAddress: sessions from one address hold at most
// MaxMemoryPerHost of the budget (refused as busy beyond it), while
// another address still gets a session.
func TestMemoryShareLimitsOneAddress(t *testing.T) {
	root := t.TempDir()
	addr, srv := startServer(t, root, func(s *Server) {
		s.MaxMemory, s.MaxMemoryPerHost = 256<<20, 64<<20
		s.MaxSessionMemory = defaultSessionMemory
	})
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	opened := make(chan struct{}, 16)
	errs := make(chan error, 16)
	go func() {
		for range opened { // not needed here
		}
	}()
	var wg sync.WaitGroup
	for i := range 8 { // 8 × (12 MiB + 4.6 MiB) > 64 MiB
		wg.Go(func() { errs <- claimer(ctx, addr, 3, fmt.Sprint("a", i), time.Hour, opened) })
	}
	// Every claimer either holds a session with its frame reserved or
	// was refused (a frame is reserved when the server reads it, after
	// opened said it was sent).
	busy := 0
	require.Eventually(t, func() bool {
		for {
			select {
			case err := <-errs:
				require.ErrorIs(t, err, ErrBusy)
				require.ErrorContains(t, err, "127.0.0.3 holds its share")
				busy++
				continue
			default:
			}
			break
		}
		srv.mem.mu.Lock()
		held := srv.mem.hostUsed["127.0.0.3"]
		srv.mem.mu.Unlock()
		n := srv.activeSessions()
		return n+busy == 8 && held >= int64(n)*(sessionFixed+4<<20)
	}, 30*time.Second, 5*time.Millisecond)
	srv.mem.mu.Lock()
	held := srv.mem.hostUsed["127.0.0.3"]
	srv.mem.mu.Unlock()
	t.Logf("127.0.0.3 holds %d MiB in %d sessions; %d refused", held>>20, 8-busy, busy)
	require.Positive(t, busy)
	require.LessOrEqual(t, held, int64(64<<20))
	// Another address is not affected.
	other, otherErr := make(chan struct{}, 1), make(chan error, 1)
	go func() { otherErr <- claimer(ctx, addr, 4, "b", time.Hour, other) }()
	select {
	case <-other:
	case err := <-otherErr:
		t.Fatalf("another address refused: %v", err)
	}
	require.Eventually(t, func() bool { return srv.activeSessions() == 8-busy+1 }, 30*time.Second, 5*time.Millisecond)
	cancel()
	wg.Wait()
	close(opened)
}
