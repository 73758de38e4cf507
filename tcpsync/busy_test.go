package tcpsync

import (
	"context"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	wtarget "github.com/sparsesync/sparsesync/internal/target"
	"github.com/sparsesync/sparsesync/sparse"
	"github.com/stretchr/testify/require"
)

// slowWalkSource is a file source whose walk from the start first takes
// d: a source of tens of millions of extents, whose walk before SRCINFO
// outlasts the idle timeout.
type slowWalkSource struct {
	*FileSource
	d     time.Duration
	walks atomic.Int32
}

func (s *slowWalkSource) WalkExtents(ctx context.Context, from int64, fn func(sparse.Extent) error) error {
	if from == 0 && s.walks.Add(1) == 1 {
		time.Sleep(s.d)
	}
	return s.FileSource.WalkExtents(ctx, from, fn)
}

// TestLongPhasesStayAlive: phases that count no byte and last three idle
// timeouts (a slow fdatasync or fsync of the target at its commit, and a
// slow walk of the source before SRCINFO) end in a verified sync at the
// first attempt, with both sides' sessions clean: the busy side tells its
// peer it works (wire.FeatBusy). With a peer that plays one without the
// feature, the same sync fails on the idle timeout.
func TestLongPhasesStayAlive(t *testing.T) {
	t.Parallel() // it waits on slowed storage or a rate: beside the other waiting tests
	const idle = time.Second
	const phase = 3*idle + idle/2
	slow := func(op wtarget.Op) *wtarget.Faults {
		return wtarget.NewFaults(wtarget.Fault{Op: op, Path: "img*", Delay: phase})
	}
	for _, tc := range []struct {
		name   string
		push   bool
		atomic bool
		// serverFaults, clientFaults slow the target's syncs; walk slows
		// the pushed source's walk.
		serverFaults, clientFaults *wtarget.Faults
		walk                       bool
		// olderToo also runs the case with the client playing a peer
		// without featBusy, which must fail (one case per side).
		olderToo bool
	}{
		{name: "push, slow fdatasync at commit", push: true, serverFaults: slow(wtarget.OpFdatasync), olderToo: true},
		{name: "push --atomic, slow fsync before the read-back and at commit", push: true, atomic: true, serverFaults: slow(wtarget.OpFsync)},
		{name: "pull, slow fdatasync at commit", clientFaults: slow(wtarget.OpFdatasync)},
		{name: "push, slow walk of the source", push: true, walk: true, olderToo: true},
	} {
		for _, older := range []bool{false, true} {
			if older && !tc.olderToo {
				continue
			}
			name := tc.name
			if older {
				name += ", older peer"
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel() // each waits out its slow phase: together, not one after another
				root, local := t.TempDir(), t.TempDir()
				var ends <-chan SessionEvent
				addr, _ := startServer(t, root, func(s *Server) {
					ends = sessionEnds(s)
					s.IdleTimeout = idle
					s.faults = tc.serverFaults
				})
				o := clientOpts()
				o.IdleTimeout, o.Atomic, o.MaxAttempts = idle, tc.atomic, 1
				o.faults = tc.clientFaults
				if older {
					o.hooks = &testHooks{notBusy: true}
				}
				src, dst := filepath.Join(local, "img"), filepath.Join(root, "img")
				if !tc.push {
					src, dst = dst, src
				}
				require.NoError(t, writeImage(src, 8<<20, 0.5, 4, 31))
				start := time.Now()
				var st Stats
				var err error
				switch {
				case tc.walk:
					f, ferr := os.Open(src)
					require.NoError(t, ferr)
					defer f.Close()
					fs, ferr := NewFileSource(f)
					require.NoError(t, ferr)
					st, err = Push(t.Context(), addr, &slowWalkSource{FileSource: fs, d: phase}, "img", o)
				case tc.push:
					st, err = PushFile(t.Context(), addr, src, "img", o)
				default:
					st, err = Pull(t.Context(), addr, "img", dst, o)
				}
				ev := waitSessions(t, ends, 1, time.Minute)[0]
				if older {
					require.Error(t, err, "a peer without wire.FeatBusy hears nothing for %v", phase)
					return
				}
				require.NoError(t, err)
				require.Greater(t, time.Since(start), 3*idle, "the phase outlasted three idle timeouts")
				require.True(t, st.Verified)
				require.Equal(t, 1, st.Attempts)
				require.NoError(t, ev.Err, "the server's session")
				requireSame(t, src, dst)
			})
		}
	}
}
