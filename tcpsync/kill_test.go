package tcpsync

import (
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sparsesync/sparsesync/internal/wire"
	"github.com/sparsesync/sparsesync/sparse"
)

const helperEnv = "TCPSYNC_HELPER_SERVER"

// TestHelperServer is not a test: run with TCPSYNC_HELPER_SERVER=root,addrfile
// it serves root (checkpointing every 8 MiB) until killed.
func TestHelperServer(t *testing.T) {
	spec := os.Getenv(helperEnv)
	if spec == "" {
		t.Skip("helper process for TestReceiverKilledResumes")
	}
	root, addrFile, _ := strings.Cut(spec, ",")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(addrFile+".tmp", []byte(ln.Addr().String()), 0o600))
	require.NoError(t, os.Rename(addrFile+".tmp", addrFile))
	srv := &Server{Root: root, Token: testToken, CheckpointBytes: 8 << 20}
	_ = srv.Serve(context.Background(), ln)
}

func startHelper(t *testing.T, root string) (*exec.Cmd, string) {
	addrFile := filepath.Join(t.TempDir(), "addr")
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperServer$")
	cmd.Env = append(os.Environ(), helperEnv+"="+root+","+addrFile)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	var addr []byte
	require.Eventually(t, func() bool {
		var err error
		addr, err = os.ReadFile(addrFile)
		return err == nil
	}, 20*time.Second, 10*time.Millisecond)
	return cmd, string(addr)
}

// TestReceiverKilledResumes SIGKILLs the receiving server process in the
// middle of a push (no chance to checkpoint on the way out). If the dead
// session wrote past its last periodic checkpoint, the target is no longer
// the one the checkpoint recorded (its ctime moved): the next push does not
// trust the checkpoint but compares every chunk, which keeps what was
// written (only hashes cross for it). If the kill came before any such
// write, the next push resumes from the checkpoint. Either way the result
// is identical.
func TestReceiverKilledResumes(t *testing.T) {
	root, local := t.TempDir(), t.TempDir()
	src := filepath.Join(local, "src")
	require.NoError(t, writeImage(src, 256<<20, 0.4, 4, 21))
	cmd, addr := startHelper(t, root)
	o := clientOpts()
	o.Compress = CompressNone
	o.Dial = func(ctx context.Context, network, a string) (net.Conn, error) {
		var d net.Dialer
		c, err := d.DialContext(ctx, network, a)
		if err != nil {
			return nil, err
		}
		return throttleConn{c, 80 << 20}, nil
	}
	side := filepath.Join(root, "img"+sidecarSuffix)
	go func() {
		for {
			if sc, err := os.ReadFile(side); err == nil && strings.Contains(string(sc), `"done":`) &&
				!strings.Contains(string(sc), `"done":0`) {
				_ = cmd.Process.Kill()
				return
			}
			time.Sleep(2 * time.Millisecond)
		}
	}()
	_, err := PushFile(t.Context(), addr, src, "img", o)
	require.Error(t, err, "the push fails when the server dies")
	sc := readSidecar(t, filepath.Join(root, "img"))
	require.Equal(t, stateIncomplete, sc.State)
	require.Positive(t, sc.Done)

	_, addr2 := startHelper(t, root)
	st, err := PushFile(t.Context(), addr2, src, "img", clientOpts())
	require.NoError(t, err)
	if st.ResumedFrom == 0 {
		require.Positive(t, st.UnchangedBytes, "what the dead session wrote is kept")
	} else {
		require.Equal(t, sc.Done, st.ResumedFrom)
	}
	require.Less(t, st.CopiedBytes, st.DataBytes)
	requireSame(t, src, filepath.Join(root, "img"))
	t.Logf("resumed from %d of %d; copied %d", st.ResumedFrom, st.Size, st.CopiedBytes)
}

// lyingSource returns different bytes for one block on every second read,
// so the compare pass and the resend disagree: the digest must catch it,
// on the first attempt and on the full-compare retry.
type lyingSource struct {
	*FileSource
	at    int64
	reads int
}

func (l *lyingSource) ReadAt(b []byte, off int64) (int, error) {
	n, err := l.FileSource.ReadAt(b, off)
	if off <= l.at && l.at < off+int64(n) {
		l.reads++
		if l.reads%2 == 0 { // every second read of the block lies
			b[l.at-off] ^= 0xff
		}
	}
	return n, err
}

func TestVerificationCatchesChangingSource(t *testing.T) {
	root, local := t.TempDir(), t.TempDir()
	addr, _ := startServer(t, root, nil)
	src := filepath.Join(local, "src")
	require.NoError(t, writeImage(src, 16<<20, 0.5, 2, 31))
	_, err := PushFile(t.Context(), addr, src, "img", clientOpts())
	require.NoError(t, err)
	mutate(t, src, 1, 5)
	m, _, err := sparse.ReadMap(t.Context(), src)
	require.NoError(t, err)
	// Find the mutated block: the one that now differs from the target.
	a, _ := os.ReadFile(src)
	b, _ := os.ReadFile(filepath.Join(root, "img"))
	at := int64(-1)
	for i := range a {
		if a[i] != b[i] {
			at = int64(i)
			break
		}
	}
	require.True(t, at >= 0 && m.Contains(at))
	f, err := os.Open(src)
	require.NoError(t, err)
	defer f.Close()
	fs, err := NewFileSource(f)
	require.NoError(t, err)
	o := clientOpts()
	_, err = Push(t.Context(), addr, &lyingSource{FileSource: fs, at: at}, "img", o)
	require.True(t, errors.Is(err, ErrVerify), "got %v", err)
	require.Equal(t, stateIncomplete, readSidecar(t, filepath.Join(root, "img")).State)
}

// TestIdleSessionDropped: an authenticated client that goes quiet before
// OPEN is cut at the handshake deadline (OPEN is part of the handshake's
// time budget since issue 12).
func TestIdleSessionDropped(t *testing.T) {
	addr, _ := startServer(t, t.TempDir(), func(s *Server) { s.IdleTimeout = 300 * time.Millisecond; s.HandshakeTimeout = 300 * time.Millisecond })
	f, c := rawSession(t, addr, testToken)
	_, _, err := f.expect(wire.Open)
	require.Error(t, err)
	// The server's cut, not our own 20 s deadline (rawSession's) ending
	// the wait: no wall-clock bound needed.
	require.NotErrorIs(t, err, os.ErrDeadlineExceeded, "the server never cut the idle session")
	_, err = c.Read(make([]byte, 1))
	require.Error(t, err)
}
