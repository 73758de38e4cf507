package tcpsync

import (
	"context"
	"crypto/rand"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// writeText makes a file of n bytes of log-like text (compressible).
func writeText(t *testing.T, path string, n int) {
	b := make([]byte, 0, n+200)
	for i := 0; len(b) < n; i++ {
		b = append(b, []byte(`{"ts":1700000000,"level":"info","msg":"request served","path":"/v1/items/`)...)
		b = append(b, byte('0'+i%10), byte('0'+i/10%10), '"', '}', '\n')
	}
	require.NoError(t, os.WriteFile(path, b[:n], 0o644))
}

func TestCompression(t *testing.T) {
	root, local := t.TempDir(), t.TempDir()
	addr, _ := startServer(t, root, nil)
	text := filepath.Join(local, "text")
	writeText(t, text, 8<<20)
	random := filepath.Join(local, "random")
	rb := make([]byte, 16<<20)
	_, _ = rand.Read(rb)
	require.NoError(t, os.WriteFile(random, rb, 0o644))
	for _, c := range []Compression{CompressNone, CompressLZ4, CompressZstd} {
		for _, src := range []string{text, random} {
			name := c.String() + "-" + filepath.Base(src)
			o := clientOpts()
			o.Compress = c
			st, err := PushFile(t.Context(), addr, src, name, o)
			require.NoError(t, err)
			requireSame(t, src, filepath.Join(root, name))
			ratio := float64(st.WireBytesSent) / float64(st.CopiedBytes)
			t.Logf("%s: %d bytes sent for %d copied (%.2f)", name, st.WireBytesSent, st.CopiedBytes, ratio)
			switch {
			case c == CompressNone || src == random:
				require.Greater(t, ratio, 0.97, "raw or incompressible data travels raw")
			case c == CompressLZ4:
				require.Less(t, ratio, 0.5)
			case c == CompressZstd:
				require.Less(t, ratio, 0.3)
			}
			// Pull with the same codec (the server compresses).
			dst := filepath.Join(local, name+".pulled")
			st, err = Pull(t.Context(), addr, name, dst, o)
			require.NoError(t, err)
			requireSame(t, src, dst)
		}
	}
	_, err := ParseCompression("gzip")
	require.Error(t, err)
}

// throttleConn limits writes to about rate bytes per second.
type throttleConn struct {
	net.Conn
	rate float64
}

func (c throttleConn) Write(b []byte) (int, error) {
	n := 0
	for len(b) > 0 {
		k := min(len(b), 64<<10)
		w, err := c.Conn.Write(b[:k])
		n += w
		if err != nil {
			return n, err
		}
		time.Sleep(time.Duration(float64(k) / c.rate * float64(time.Second)))
		b = b[k:]
	}
	return n, nil
}

// TestAutoDecide pins CompressAuto's rule on numbers, not on a measured
// link: on when over half the window was spent waiting for the network and
// the rate is below zstd-1's, kept on while over a tenth was.
func TestAutoDecide(t *testing.T) {
	const mib = 1 << 20
	s := time.Second
	for _, c := range []struct {
		name             string
		on               bool
		sent             int64
		elapsed, blocked time.Duration
		want             bool
	}{
		{"network-bound: on", false, 100 * mib, s, s * 9 / 10, true},
		{"half blocked is not more than half", false, 100 * mib, s, s / 2, false},
		{"CPU-bound: stays off", false, 100 * mib, s, s / 5, false},
		{"on, still waiting a fifth: stays on", true, 100 * mib, s, s / 5, true},
		{"on, no longer waiting: off", true, 100 * mib, s, s / 20, false},
		{"faster than zstd-1: off even if blocked", false, 300e6, s, s, false},
		{"faster than zstd-1: on turns off", true, 300e6, s, s, false},
		{"no time elapsed", true, mib, 0, 0, false},
	} {
		require.Equal(t, c.want, autoDecide(c.on, c.sent, c.elapsed, c.blocked), c.name)
	}
}

// TestAutoCompressesWhenNetworkBound: on a slow link auto switches zstd on;
// on loopback it stays raw. TestAutoDecide pins the rule itself, without
// a measured link.
func TestAutoCompressesWhenNetworkBound(t *testing.T) {
	root, local := t.TempDir(), t.TempDir()
	addr, _ := startServer(t, root, nil)
	text := filepath.Join(local, "text")
	writeText(t, text, 64<<20)
	o := clientOpts()
	o.Compress = CompressAuto
	st, err := PushFile(t.Context(), addr, text, "fast", o)
	require.NoError(t, err)
	fast := float64(st.WireBytesSent) / float64(st.CopiedBytes)

	o.Dial = func(ctx context.Context, network, a string) (net.Conn, error) {
		var d net.Dialer
		c, err := d.DialContext(ctx, network, a)
		if err != nil {
			return nil, err
		}
		return throttleConn{c, 100 << 20}, nil
	}
	st, err = PushFile(t.Context(), addr, text, "slow", o)
	require.NoError(t, err)
	requireSame(t, text, filepath.Join(root, "slow"))
	slow := float64(st.WireBytesSent) / float64(st.CopiedBytes)
	t.Logf("auto: %.2f of the data on the wire on loopback, %.2f on a 100 MB/s link", fast, slow)
	require.Less(t, slow, 0.75, "auto compressed on the slow link")
}
