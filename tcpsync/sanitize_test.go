package tcpsync

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sparsesync/sparsesync/internal/wire"
)

// TestPeerErrorTextSanitized: an ERROR frame from a hostile peer carrying
// C0 and C1 controls (ESC, CSI U+009B), bidi overrides and isolates and
// invalid UTF-8 reaches the caller as inert text.
func TestPeerErrorTextSanitized(t *testing.T) {
	hostile := "ok\x1b[2J\u009b31m\u202eevil\u2066x\u2069\u200f\xff\ndone"
	body := binary.LittleEndian.AppendUint16(nil, wire.CodeBusy)
	err := decodeError(append(body, hostile...))
	msg := err.Error()
	for _, r := range msg {
		require.False(t, r < 0x20 || r == 0x7f || (r >= 0x80 && r <= 0x9f), "control %U in %q", r, msg)
		require.False(t, (r >= 0x202a && r <= 0x202e) || (r >= 0x2066 && r <= 0x2069) || r == 0x200e || r == 0x200f || r == 0x061c,
			"bidi control %U in %q", r, msg)
	}
	require.NotContains(t, msg, "\ufffd")
	require.True(t, strings.HasPrefix(msg, "remote: ok\\x1b[2J\\u009b31m\\u202eevil"), msg)
	require.ErrorIs(t, err, ErrBusy)
}

// TestTokenFileContent: the token file is checked for more than its
// length: content charset, variety, owner and mode.
func TestTokenFileContent(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "tok")
	for _, c := range []struct {
		content string
		ok      bool
	}{
		{NewToken() + "\n", true},
		{"Xq7#vR2p!Lm9@Tz4$Wn8%Bk3^Hd6&Jf1*Gs5", true}, // printable, random-looking
		{string(testToken), false},                     // "0123456789abcdef…-test-token": a run, a repeat, a word
		{strings.Repeat("a", 64), false},               // hex "aa…": one distinct byte
		{strings.Repeat("0", 64), false},               // hex zeros
		{strings.Repeat("abcd", 16) + "!", false},      // printable, 4 distinct bytes
		{"tok en with spaces and enough length 0123456789", false},
		{"\x00\x01binary" + strings.Repeat("\xfe", 40), false},
	} {
		require.NoError(t, os.WriteFile(p, []byte(c.content), 0o600))
		_, err := LoadToken(p)
		if c.ok {
			require.NoError(t, err, "%q", c.content)
		} else {
			require.ErrorIs(t, err, ErrTokenFile, "%q", c.content)
		}
	}
	if os.Geteuid() == 0 {
		require.NoError(t, os.WriteFile(p, []byte(NewToken()), 0o600))
		require.NoError(t, os.Chown(p, 12345, 12345))
		_, err := LoadToken(p)
		require.ErrorIs(t, err, ErrTokenFile, "owned by another user")
	}
}

// TestRemoteTextWithoutPackageName: a server's ERROR names no package (the
// client's error carries the code's sentinel, and the CLI's line names the
// command), and an older server's leading "tcpsync: " is dropped.
func TestRemoteTextWithoutPackageName(t *testing.T) {
	addr, _ := startServer(t, t.TempDir(), nil)
	_, err := Pull(t.Context(), addr, "nope.img", filepath.Join(t.TempDir(), "out.img"), clientOpts())
	require.ErrorIs(t, err, ErrNotFound)
	var re *RemoteError
	require.ErrorAs(t, err, &re)
	require.True(t, strings.HasPrefix(re.Msg, "no such remote file"), "server's message %q", re.Msg)
	require.NotContains(t, re.Msg, "tcpsync: ")

	old := decodeError(append(binary.LittleEndian.AppendUint16(nil, wire.CodeNotFound), `tcpsync: no such remote file: "nope.img"`...))
	require.Equal(t, `remote: no such remote file: "nope.img"`, old.Error())
	require.ErrorIs(t, old, ErrNotFound)
}

// TestWireTextLeavesOutSentinelNames: every sentinel's package name goes,
// wherever it stands, and nothing else of the text.
func TestWireTextLeavesOutSentinelNames(t *testing.T) {
	err := fmt.Errorf("%w: %w: got DATA at /srv/tcpsync: x", ErrUnauthorized, ErrProtocol)
	require.Equal(t, "authentication failed: protocol violation: got DATA at /srv/tcpsync: x", wireText(err))
	require.Equal(t, "sending: broken pipe", wireText(fmt.Errorf("sending: %w", syscall.EPIPE)))
}
