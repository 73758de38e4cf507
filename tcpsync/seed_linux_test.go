package tcpsync

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/sparsesync/sparsesync/internal/kcopy"
)

// TestSeedKernelCopyRules: an atomic push seeds its temporary file from the
// old target with internal/kcopy. When copy_file_range cannot (EXDEV before
// any data) the seed falls back to read/write and the push is exact; when it
// fails after it has copied data, the push fails and the old target is left
// as it was, never silently seeded by another method. Not parallel: it
// swaps kcopy's syscall hook.
func TestSeedKernelCopyRules(t *testing.T) {
	for _, tc := range []struct {
		name    string
		fail    func(call int) bool // whether the call-th call fails
		errno   unix.Errno
		wantErr bool
	}{
		{name: "exdev-falls-back", fail: func(int) bool { return true }, errno: unix.EXDEV},
		{name: "eopnotsupp-after-data-fails", fail: func(call int) bool { return call > 1 }, errno: unix.EOPNOTSUPP, wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root, local := t.TempDir(), t.TempDir()
			addr, _ := startServer(t, root, nil)
			src := filepath.Join(local, "src")
			require.NoError(t, writeImage(src, 16<<20, 0.5, 4, 11))
			_, err := PushFile(t.Context(), addr, src, "img", clientOpts())
			require.NoError(t, err)
			before, err := os.ReadFile(filepath.Join(root, "img"))
			require.NoError(t, err)
			mutate(t, src, 10, 12)

			real := *kcopy.CopyFileRangeHook
			t.Cleanup(func() { *kcopy.CopyFileRangeHook = real })
			calls := 0
			*kcopy.CopyFileRangeHook = func(rfd int, roff *int64, wfd int, woff *int64, n int, fl int) (int, error) {
				calls++
				if tc.fail(calls) {
					return 0, tc.errno
				}
				// A short copy, so that a range needs a second call.
				return real(rfd, roff, wfd, woff, min(n, 4096), fl)
			}
			o := clientOpts()
			o.Atomic = true
			_, err = PushFile(t.Context(), addr, src, "img", o)
			*kcopy.CopyFileRangeHook = real
			if tc.wantErr {
				require.Error(t, err)
				after, rerr := os.ReadFile(filepath.Join(root, "img"))
				require.NoError(t, rerr)
				require.Equal(t, before, after, "a failed atomic push changed the target")
				return
			}
			require.NoError(t, err)
			requireSame(t, src, filepath.Join(root, "img"))
		})
	}
}
