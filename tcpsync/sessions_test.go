package tcpsync

import (
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sparsesync/sparsesync/internal/testutil/layout"
)

// gatedSource is a FileSource whose first read signals started and whose
// reads wait for release: it holds a session open for as long as a test
// needs, without depending on how fast anything runs.
type gatedSource struct {
	*FileSource
	once    sync.Once
	started chan struct{}
	release chan struct{}
}

func (g *gatedSource) ReadAt(p []byte, off int64) (int, error) {
	g.once.Do(func() { close(g.started) })
	<-g.release
	return g.FileSource.ReadAt(p, off)
}

// TestMaxSessions: Server.MaxSessions (serve --max-sessions) is a cap on
// the syncs running at once, the per-node rebuild limit: while one session
// holds the only slot another push is refused as busy, a transient refusal
// the client retries (each attempt refused the same way, then ErrBusy
// naming the cap); once the slot is free the same push goes through. The
// per-address cap (MaxSessionsPerHost) refuses in the same way, naming the
// address.
func TestMaxSessions(t *testing.T) {
	for _, tc := range []struct {
		name string
		mod  func(*Server)
		msg  string
	}{
		{"max-sessions", func(s *Server) { s.MaxSessions = 1 }, "too many sessions"},
		{"max-sessions-per-host", func(s *Server) { s.MaxSessionsPerHost = 1 }, "too many sessions from 127.0.0.1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root, local := t.TempDir(), t.TempDir()
			addr, _ := startServer(t, root, tc.mod)
			src := writeLayout(t, local, "src", layout.Layout{Size: 4 << 20, Data: layout.Ranges(0, 1<<20)})
			f, err := os.Open(src)
			require.NoError(t, err)
			defer f.Close()
			fs, err := NewFileSource(f)
			require.NoError(t, err)
			held := &gatedSource{FileSource: fs, started: make(chan struct{}), release: make(chan struct{})}
			first := make(chan error, 1)
			go func() {
				_, err := Push(t.Context(), addr, held, "held.img", clientOpts())
				first <- err
			}()
			select {
			case <-held.started:
			case err := <-first:
				t.Fatalf("the first push ended before reading: %v", err)
			}

			o := clientOpts()
			o.MaxAttempts = 3
			st, err := PushFile(t.Context(), addr, src, "second.img", o)
			require.ErrorIs(t, err, ErrBusy)
			require.ErrorContains(t, err, tc.msg)
			require.Equal(t, 3, st.Attempts, "a busy server is a transient refusal: retried")
			_, err = os.Stat(filepath.Join(root, "second.img"))
			require.ErrorIs(t, err, os.ErrNotExist, "a refused session wrote nothing")

			close(held.release)
			select {
			case err := <-first:
				require.NoError(t, err)
			case <-time.After(2 * time.Minute):
				t.Fatal("the held push did not finish after its release")
			}
			requireSame(t, src, filepath.Join(root, "held.img"))
			// The slot is free again (the server releases it when the
			// session's goroutine ends, which may trail the client's
			// return a little: the client's retries cover that).
			o.MaxAttempts, o.MaxBackoff = 21, 200*time.Millisecond
			_, err = PushFile(t.Context(), addr, src, "second.img", o)
			require.NoError(t, err)
			requireSame(t, src, filepath.Join(root, "second.img"))
		})
	}
}
