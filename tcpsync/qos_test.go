package tcpsync

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sparsesync/sparsesync/qos"
)

// qosSource writes a 16 MiB sparse file with three runs of non-zero
// random data and returns its data bytes.
func qosSource(t *testing.T, path string, seed uint64) int64 {
	t.Helper()
	data := []struct{ off, n int64 }{{0, 1 << 20}, {5 << 20, 3 << 20}, {15 << 20, 256 << 10}}
	for i := range int64(16) { // small extents close enough to share a read: holes are not charged
		data = append(data, struct{ off, n int64 }{10<<20 + i*16<<10, 4 << 10})
	}
	sort.Slice(data, func(i, j int) bool { return data[i].off < data[j].off })
	f, err := os.Create(path)
	require.NoError(t, err)
	defer f.Close()
	require.NoError(t, f.Truncate(16<<20))
	rng := rand.New(rand.NewPCG(seed, 2))
	var total int64
	for _, d := range data {
		b := make([]byte, d.n)
		for i := range b {
			b[i] = byte(rng.Uint32() | 1)
		}
		_, err := f.WriteAt(b, d.off)
		require.NoError(t, err)
		total += d.n
	}
	return total
}

// sessions collects the server's session events.
type sessions struct {
	mu  sync.Mutex
	evs []SessionEvent
}

func (s *sessions) add(ev SessionEvent) {
	s.mu.Lock()
	s.evs = append(s.evs, ev)
	s.mu.Unlock()
}

func (s *sessions) wait(t *testing.T, n int) []SessionEvent {
	t.Helper()
	require.Eventually(t, func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return len(s.evs) >= n
	}, 20*time.Second, 5*time.Millisecond)
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]SessionEvent(nil), s.evs...)
}

// A budget is charged exactly what moved, on both sides: the sender's
// source reads, the receiver's writes and its reads of the existing target
// (comparison, read-back), and every byte on the wire, both ways.
func TestBudgetChargesWhatMovesTCP(t *testing.T) {
	root := t.TempDir()
	var evs sessions
	srvBudget := qos.NewBudget(4 << 30)
	addr, _ := startServer(t, root, func(s *Server) {
		s.Budget = srvBudget
		s.OnSession = evs.add
	})
	src := filepath.Join(t.TempDir(), "src")
	total := qosSource(t, src, 1)

	// A first push: the client reads the data, the server writes it.
	cli := qos.NewBudget(4 << 30)
	o := clientOpts()
	o.Budget, o.ReadBack = cli, ReadBackOff
	st, err := PushFile(t.Context(), addr, src, "img", o)
	require.NoError(t, err)
	requireSame(t, src, filepath.Join(root, "img"))
	ev := evs.wait(t, 1)[0]
	require.NoError(t, ev.Err)
	require.Equal(t, total, cli.Read.Bytes(), "the client's source reads")
	require.Zero(t, cli.Write.Bytes())
	require.Equal(t, st.WireBytesSent+st.WireBytesReceived, cli.Wire.Bytes(), "the client's wire bytes, both ways")
	require.Zero(t, srvBudget.Read.Bytes(), "nothing to compare with")
	require.Equal(t, total, srvBudget.Write.Bytes(), "the server's target writes")
	require.Equal(t, ev.Stats.WireBytesSent+ev.Stats.WireBytesReceived, srvBudget.Wire.Bytes(), "the server's wire bytes")
	require.Equal(t, cli.Wire.Bytes(), srvBudget.Wire.Bytes(), "what one side sent the other received")

	// A re-sync of one changed block with the read-back: the server reads
	// its target to compare and again to check it; it writes one block.
	mutate(t, src, 1, 7)
	cli = qos.NewBudget(4 << 30)
	read0, write0, wire0 := srvBudget.Read.Bytes(), srvBudget.Write.Bytes(), srvBudget.Wire.Bytes()
	o.Budget, o.ReadBack = cli, ReadBackOn
	st, err = PushFile(t.Context(), addr, src, "img", o)
	require.NoError(t, err)
	requireSame(t, src, filepath.Join(root, "img"))
	ev = evs.wait(t, 2)[1]
	require.NoError(t, ev.Err)
	require.True(t, ev.Stats.ReadBack)
	require.Equal(t, total+st.CopiedBytes, cli.Read.Bytes(), "the client reads all its data to compare, and the changed block again to send it")
	require.Equal(t, int64(4096), st.CopiedBytes)
	require.Equal(t, int64(4096), srvBudget.Write.Bytes()-write0, "one block written")
	require.Equal(t, total+ev.Stats.ReadBackBytes, srvBudget.Read.Bytes()-read0, "compared blocks and the read-back")
	require.Equal(t, ev.Stats.WireBytesSent+ev.Stats.WireBytesReceived, srvBudget.Wire.Bytes()-wire0)

	// An atomic re-sync of one changed block: the server first seeds its
	// temporary file with the target's data (read and written, charged
	// like any other copy), then compares and writes the block.
	mutate(t, src, 1, 8)
	cli = qos.NewBudget(4 << 30)
	read0, write0 = srvBudget.Read.Bytes(), srvBudget.Write.Bytes()
	o.Budget, o.ReadBack, o.Atomic = cli, ReadBackOff, true
	st, err = PushFile(t.Context(), addr, src, "img", o)
	require.NoError(t, err)
	requireSame(t, src, filepath.Join(root, "img"))
	require.NoError(t, evs.wait(t, 3)[2].Err)
	require.Equal(t, int64(4096), st.CopiedBytes)
	require.Equal(t, total+4096, srvBudget.Write.Bytes()-write0, "the seeded temporary file and one block")
	require.Equal(t, total+total, srvBudget.Read.Bytes()-read0, "the seed's reads and the compared blocks")
	o.Atomic = false

	// A pull: the server reads, the client writes.
	cli = qos.NewBudget(4 << 30)
	o.Budget, o.ReadBack = cli, ReadBackOff
	dst := filepath.Join(t.TempDir(), "pulled")
	st, err = Pull(t.Context(), addr, "img", dst, o)
	require.NoError(t, err)
	requireSame(t, src, dst)
	require.Equal(t, total, cli.Write.Bytes(), "the client's target writes")
	require.Zero(t, cli.Read.Bytes())
	require.Equal(t, st.WireBytesSent+st.WireBytesReceived, cli.Wire.Bytes())
}

// Concurrent sessions draw from the server's one budget: it is charged
// the sum of what they moved.
func TestServerBudgetSharedBySessions(t *testing.T) {
	root := t.TempDir()
	var evs sessions
	b := qos.NewBudget(4 << 30)
	addr, _ := startServer(t, root, func(s *Server) {
		s.Budget = b
		s.OnSession = evs.add
	})
	const n = 3
	var totals int64
	srcs := make([]string, n)
	for i := range srcs {
		srcs[i] = filepath.Join(t.TempDir(), "src")
		totals += qosSource(t, srcs[i], uint64(i+10))
	}
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			o := clientOpts()
			o.ReadBack = ReadBackOff
			_, errs[i] = PushFile(t.Context(), addr, srcs[i], fmt.Sprintf("img%d", i), o)
		})
	}
	wg.Wait()
	for i, err := range errs {
		require.NoError(t, err)
		requireSame(t, srcs[i], filepath.Join(root, fmt.Sprintf("img%d", i)))
	}
	var wire int64
	for _, ev := range evs.wait(t, n) {
		require.NoError(t, ev.Err)
		wire += ev.Stats.WireBytesSent + ev.Stats.WireBytesReceived
	}
	require.Equal(t, totals, b.Write.Bytes(), "every session's writes")
	require.Equal(t, wire, b.Wire.Bytes(), "every session's wire bytes")
}

// A slow limit on one side only, with a short idle timeout on both: the
// limited side's waits are not a stall to itself (its watchdog is held,
// its read deadlines pushed back), and its DATA frames are cut so that
// each reaches the peer well within the peer's read deadline.
func TestSlowLimitIsNoStall(t *testing.T) {
	t.Parallel() // it waits on slowed storage or a rate: beside the other waiting tests
	const idle = 2 * time.Second
	for _, side := range []string{"client", "server"} {
		t.Run(side, func(t *testing.T) {
			t.Parallel() // each waits out its rate: together, not one after another
			root := t.TempDir()
			var evs sessions
			// 384 KiB/s: a 1 MiB DATA frame or read would take 2.7 s, over
			// the idle timeout; the push takes about 4 s of the limit.
			b := qos.NewBudget(384 << 10)
			addr, _ := startServer(t, root, func(s *Server) {
				s.IdleTimeout = idle
				s.OnSession = evs.add
				if side == "server" {
					s.Budget = b
				}
			})
			src := filepath.Join(t.TempDir(), "src")
			f, err := os.Create(src)
			require.NoError(t, err)
			buf := make([]byte, 3<<19)
			for i := range buf {
				buf[i] = byte(i*7 | 1)
			}
			_, err = f.Write(buf)
			require.NoError(t, err)
			require.NoError(t, f.Close())
			o := clientOpts()
			o.IdleTimeout, o.ReadBack, o.Compress = idle, ReadBackOff, CompressNone
			if side == "client" {
				o.Budget = b
			}
			st, err := PushFile(t.Context(), addr, src, "img", o)
			ev := evs.wait(t, 1)[0]
			require.NoError(t, err, "the server's side: %v", ev.Err)
			require.NoError(t, ev.Err)
			requireSame(t, src, filepath.Join(root, "img"))
			throttled := st.Throttled
			if side == "server" {
				throttled = ev.Stats.Throttled
			}
			require.Positive(t, throttled, "the limited side waited on its budget")
			require.Equal(t, int64(len(buf)), b.Read.Bytes()+b.Write.Bytes(), "the data, read or written")
		})
	}
}
