package tcpsync

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestNotSparsesyncServer: a client pointed at another service fails at
// its first attempt, saying what answered, instead of retrying a
// protocol violation or reporting an unknown frame type.
func TestNotSparsesyncServer(t *testing.T) {
	for _, c := range []struct{ name, banner, want string }{
		{"ssh", "SSH-2.0-OpenSSH_9.2p1 Debian-2\r\n", `answered "SSH-2.0-OpenSSH_9.2p1 Debian-2"`},
		{"http", "HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain\r\n\r\n", `answered "HTTP/1.1 400 Bad Request Content-Type: text/`},
		{"binary", "\x00\x00\x01\x02\xff\xfe\x00\x10\x20\x30", `answered "........ 0"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			require.NoError(t, err)
			t.Cleanup(func() { ln.Close() })
			var conns atomic.Int32
			go func() {
				for {
					conn, err := ln.Accept()
					if err != nil {
						return
					}
					conns.Add(1)
					go func() {
						defer conn.Close()
						_, _ = conn.Write([]byte(c.banner))
						_, _ = conn.Read(make([]byte, 4096))
					}()
				}
			}()
			src := filepath.Join(t.TempDir(), "src")
			require.NoError(t, os.WriteFile(src, []byte("data"), 0o644))
			_, err = PushFile(t.Context(), ln.Addr().String(), src, "x.img", &Options{NoAuth: true, MaxAttempts: 4})
			require.ErrorIs(t, err, ErrNotSparsesync)
			require.ErrorContains(t, err, c.want)
			require.False(t, errors.Is(err, ErrProtocol), "no protocol violation: another service")
			require.Equal(t, int32(1), conns.Load(), "a service that is not ours is not asked again")
		})
	}
}
