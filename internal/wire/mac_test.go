package tcpsync

import (
	"bytes"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestGMACKnownAnswer checks our GMAC body tag against OpenSSL's GMAC (an
// independent implementation): key, nonce = kind ‖ 0 0 0 ‖ seq (little
// endian), message = header ‖ body, for a tag gathered from parts and one
// computed over a received frame.
func TestGMACKnownAnswer(t *testing.T) {
	openssl, err := exec.LookPath("openssl")
	if err != nil {
		t.Skip("needs openssl (3.0 or later, for `openssl mac GMAC`) as the reference")
	}
	key := bytes.Repeat([]byte{0x5a}, 32)
	hdr := []byte{byte(fData), 0, 0, 0, 40, 0, 0, 0}
	head := []byte("0123456789abcdef")
	payload := bytes.Repeat([]byte("sparse"), 4)
	const seq = 0x0102030405
	frame := append(append(append([]byte(nil), hdr...), head...), payload...)

	msg := filepath.Join(t.TempDir(), "msg")
	require.NoError(t, os.WriteFile(msg, frame, 0o600))
	nonce := []byte{'B', 0, 0, 0, 5, 4, 3, 2, 1, 0, 0, 0}
	out, err := exec.CommandContext(t.Context(), openssl, "mac", "-cipher", "AES-256-GCM",
		"-macopt", "hexkey:"+hex.EncodeToString(key), "-macopt", "hexiv:"+hex.EncodeToString(nonce),
		"-in", msg, "GMAC").CombinedOutput()
	if err != nil {
		t.Skipf("this openssl has no GMAC: %v: %s", err, out)
	}
	want := strings.ToLower(strings.TrimSpace(string(out)))

	send, err := newGMACer(key)
	require.NoError(t, err)
	send.seq = seq
	require.Equal(t, want, hex.EncodeToString(send.bodyTag(hdr, head, payload)), "gathered from parts")
	recv, err := newGMACer(key)
	require.NoError(t, err)
	recv.seq = seq
	require.Equal(t, want, hex.EncodeToString(recv.frameTag(frame)), "over a received frame")
	require.EqualValues(t, seq+1, recv.seq, "a body tag moves to the next frame")
}

// TestMACPartsEqualWhole: for both MACs, a body tag over parts equals the
// tag over the frame held whole, the header tag differs from the body
// tag, and each frame's tag differs from the last (seq moves on).
func TestMACPartsEqualWhole(t *testing.T) {
	key := bytes.Repeat([]byte{7}, 32)
	g1, err := newGMACer(key)
	require.NoError(t, err)
	g2, err := newGMACer(key)
	require.NoError(t, err)
	for name, pair := range map[string][2]*macer{"hmac": {newMacer(key), newMacer(key)}, "gmac": {g1, g2}} {
		t.Run(name, func(t *testing.T) {
			a, b := pair[0], pair[1]
			hdr := []byte{1, 2, 3, 4, 5, 6, 7, 8}
			parts := [][]byte{[]byte("head"), nil, bytes.Repeat([]byte{9}, 1000)}
			whole := bytes.Join(append([][]byte{hdr}, parts...), nil)
			var last []byte
			for range 3 {
				ht := bytes.Clone(a.headerTag(hdr))
				require.Len(t, ht, headerTagLen)
				require.Equal(t, ht, b.headerTag(hdr))
				bt := bytes.Clone(a.bodyTag(hdr, parts...))
				require.Equal(t, bt, b.frameTag(whole))
				require.NotEqual(t, ht, bt[:headerTagLen])
				require.NotEqual(t, last, bt)
				last = bt
			}
		})
	}
}

// TestGMACWithOlderPeers: a peer without featGMAC (either side) gets
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
			_, err = PushFile(t.Context(), tampered, src, "dst.img", o)
			require.ErrorIs(t, err, ErrIntegrity)
			ev := waitSessions(t, ends, 1, time.Minute)[0]
			require.ErrorIs(t, ev.Err, ErrIntegrity)
		})
	}
}

// BenchmarkFrameMAC is the per-byte cost of tagging a full DATA frame
// (what authentication adds to each side of a transfer), for the MAC
// current peers use (gmac) and the one an older peer gets (hmac), with the
// body sent in two parts (the writer's head and payload) and checked whole
// (the reader's).
func BenchmarkFrameMAC(b *testing.B) {
	g, err := newGMACer(testToken[:32])
	if err != nil {
		b.Fatal(err)
	}
	hdr := make([]byte, headerLen)
	head := make([]byte, 12)
	body := make([]byte, maxDataPayload)
	frame := make([]byte, headerLen+len(head)+len(body))
	for _, m := range []struct {
		name string
		m    *macer
	}{{"hmac", newMacer(testToken)}, {"gmac", g}} {
		b.Run(m.name+"/send", func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				m.m.headerTag(hdr)
				m.m.bodyTag(hdr, head, body)
			}
		})
		b.Run(m.name+"/receive", func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				m.m.headerTag(hdr)
				m.m.frameTag(frame)
			}
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
