package main

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestServeMaxSessionsFlags: the session caps refuse values that would
// refuse every sync, as usage errors (exit 2) naming the flag.
func TestServeMaxSessionsFlags(t *testing.T) {
	root := t.TempDir()
	for _, tc := range []struct{ flag, want string }{
		{"--max-sessions", "sparsesync: serve: --max-sessions 0: want at least 1\n"},
		{"--max-sessions-per-host", "sparsesync: serve: --max-sessions-per-host 0: want at least 1\n"},
	} {
		_, errOut, code, _ := runCLI(t, "serve", "--root", root, "--no-auth", "--listen", "127.0.0.1:0", tc.flag, "0")
		require.Equal(t, 2, code, errOut)
		require.Equal(t, tc.want, errOut)
	}
}
