package wire

import (
	"bytes"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestGMACKnownAnswer checks our GMAC body tag against OpenSSL's GMAC (an
// independent implementation): key, nonce = kind ‖ 0 0 0 ‖ seq (little
// endian), message = header ‖ body.
func TestGMACKnownAnswer(t *testing.T) {
	openssl, err := exec.LookPath("openssl")
	if err != nil {
		t.Skip("needs openssl (3.0 or later, for `openssl mac GMAC`) as the reference")
	}
	key := bytes.Repeat([]byte{0x5a}, 32)
	hdr := []byte{byte(Data), 0, 0, 0, 40, 0, 0, 0}
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

	recv, err := NewGMAC(key)
	require.NoError(t, err)
	recv.seq = seq
	require.Equal(t, want, hex.EncodeToString(recv.FrameTag(frame)))
	require.EqualValues(t, seq+1, recv.seq, "a body tag moves to the next frame")
}

// TestMACTags: for both MACs, two sides under one key agree on every tag,
// the header tag differs from the body tag, and each frame's tag differs
// from the last (seq moves on).
func TestMACTags(t *testing.T) {
	key := bytes.Repeat([]byte{7}, 32)
	g1, err := NewGMAC(key)
	require.NoError(t, err)
	g2, err := NewGMAC(key)
	require.NoError(t, err)
	for name, pair := range map[string][2]*MAC{"hmac": {NewHMAC(key), NewHMAC(key)}, "gmac": {g1, g2}} {
		t.Run(name, func(t *testing.T) {
			a, b := pair[0], pair[1]
			hdr := []byte{1, 2, 3, 4, 5, 6, 7, 8}
			whole := append(bytes.Clone(hdr), bytes.Repeat([]byte{9}, 1000)...)
			var last []byte
			for range 3 {
				ht := bytes.Clone(a.HeaderTag(hdr))
				require.Len(t, ht, HeaderTagLen)
				require.Equal(t, ht, b.HeaderTag(hdr))
				bt := bytes.Clone(a.FrameTag(whole))
				require.Equal(t, bt, b.FrameTag(whole))
				require.NotEqual(t, ht, bt[:HeaderTagLen])
				require.NotEqual(t, last, bt)
				last = bt
			}
		})
	}
}

// BenchmarkFrameMAC is the per-byte cost of tagging a full DATA frame
// (what authentication adds to each side of a transfer), for the MAC
// current peers use (gmac) and the one an older peer gets (hmac), over
// the frame held whole (as both the writer and the reader hold it).
func BenchmarkFrameMAC(b *testing.B) {
	testKey := bytes.Repeat([]byte{0x42}, 32)
	g, err := NewGMAC(testKey)
	if err != nil {
		b.Fatal(err)
	}
	hdr := make([]byte, HeaderLen)
	body := make([]byte, MaxDataPayload)
	frame := make([]byte, HeaderLen+12+len(body))
	for _, m := range []struct {
		name string
		m    *MAC
	}{{"hmac", NewHMAC(testKey)}, {"gmac", g}} {
		b.Run(m.name, func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				m.m.HeaderTag(hdr)
				m.m.FrameTag(frame)
			}
		})
	}
}
