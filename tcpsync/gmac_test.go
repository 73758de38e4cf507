package tcpsync

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestGMACWithOlderPeers: a peer without wire.FeatGMAC (either side) gets
// HMAC-SHA256 frames, the push is exact, and a byte flipped in its DATA is
// still caught; between two current peers the frames are GMAC's.
func TestGMACWithOlderPeers(t *testing.T) {
	for _, tc := range []struct {
		name                 string
		oldClient, oldServer bool
	}{
		{"both current", false, false},
		{"older client", true, false},
		{"older server", false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root, local := t.TempDir(), t.TempDir()
			var ends <-chan SessionEvent
			addr, _ := startServer(t, root, func(s *Server) {
				ends = sessionEnds(s)
				if tc.oldServer {
					s.hooks = &testHooks{hmacOnly: true}
				}
			})
			src := filepath.Join(local, "src")
			require.NoError(t, writeImage(src, 4<<20, 0.5, 8, 3))
			o := clientOpts()
			var gmac []bool
			o.hooks = &testHooks{hmacOnly: tc.oldClient, agreedMAC: func(g bool) { gmac = append(gmac, g) }}
			st, err := PushFile(t.Context(), addr, src, "dst.img", o)
			require.NoError(t, err)
			require.True(t, st.Verified)
			requireSame(t, src, filepath.Join(root, "dst.img"))
			require.Equal(t, []bool{!tc.oldClient && !tc.oldServer}, gmac, "the MAC the peers agreed on")
			waitSessions(t, ends, 1, time.Minute)

			// A flipped DATA byte fails whichever MAC tags the frames.
			at := int64(handshakeBytes + 1<<20)
			tampered := newTamperProxy(t, addr, func(pos int64, b []byte) {
				if at >= pos && at < pos+int64(len(b)) {
					b[at-pos] ^= 0x01
				}
			})
			require.NoError(t, writeImage(src, 4<<20, 1, 1, 4))
			// The server's verdict is what proves the MAC caught it; the
			// client must fail (requireToldIntegrity; seen in CI under load).
			_, err = PushFile(t.Context(), tampered, src, "dst.img", o)
			require.Error(t, err)
			ev := waitSessions(t, ends, 1, time.Minute)[0]
			require.ErrorIs(t, ev.Err, ErrIntegrity)
			requireToldIntegrity(t, err, true)
		})
	}
}

// BenchmarkPushMAC pushes 64 MiB of data over loopback into a fresh target
// (tmpfs where TMPDIR is one) with the frames tagged by each MAC: the
// difference is what the MAC costs a whole transfer. cpu-ns/op is the
// process's user and system CPU (both sides run in it).
func BenchmarkPushMAC(b *testing.B) {
	root, local := b.TempDir(), b.TempDir()
	addr, _ := startServer(b, root, nil)
	src := filepath.Join(local, "src")
	if err := writeImage(src, 64<<20, 1, 1, 5); err != nil {
		b.Fatal(err)
	}
	for _, name := range []string{"hmac", "gmac"} {
		b.Run(name, func(b *testing.B) {
			o := clientOpts()
			o.Compress = CompressNone
			o.hooks = &testHooks{hmacOnly: name == "hmac"}
			b.SetBytes(64 << 20)
			cpu0 := cpuTime(b)
			for i := 0; b.Loop(); i++ {
				dst := "dst" + strconv.Itoa(i)
				if _, err := PushFile(b.Context(), addr, src, dst, o); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				_ = os.Remove(filepath.Join(root, dst))
				b.StartTimer()
			}
			b.ReportMetric(float64(cpuTime(b)-cpu0)/float64(b.N), "cpu-ns/op")
		})
	}
}
