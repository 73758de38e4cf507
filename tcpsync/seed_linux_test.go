package tcpsync

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	wtarget "github.com/sparsesync/sparsesync/internal/target"
)

// TestSeedKernelCopyRules: an atomic push seeds its temporary file from the
// old target with internal/kcopy. When copy_file_range cannot (EXDEV before
// any data) the seed falls back to read/write and the push is exact; when it
// fails after it has copied data, the push fails and the old target is left
// as it was, never silently seeded by another method. The errnos reach the
// server's copy_file_range calls through internal/target's Faults (only
// the atomic push seeds, so only it makes such calls).
func TestSeedKernelCopyRules(t *testing.T) {
	for _, tc := range []struct {
		name    string
		faults  []wtarget.Fault
		wantErr bool
	}{
		{name: "exdev-falls-back", faults: []wtarget.Fault{{Op: wtarget.OpCopyRange, Err: unix.EXDEV}}},
		// The first call copies 4 KiB for real (a short copy, so that the
		// range needs a second call), every later one fails.
		{name: "eopnotsupp-after-data-fails", faults: []wtarget.Fault{
			{Op: wtarget.OpCopyRange, N: 1, Short: 4096}, {Op: wtarget.OpCopyRange, Err: unix.EOPNOTSUPP}}, wantErr: true},
		// A full disk at the first call: a real error, no fallback.
		{name: "enospc-fails", faults: []wtarget.Fault{{Op: wtarget.OpCopyRange, Err: unix.ENOSPC}}, wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root, local := t.TempDir(), t.TempDir()
			faults := wtarget.NewFaults(tc.faults...)
			addr, _ := startServer(t, root, func(s *Server) { s.faults = faults })
			src := filepath.Join(local, "src")
			require.NoError(t, writeImage(src, 16<<20, 0.5, 4, 11))
			_, err := PushFile(t.Context(), addr, src, "img", clientOpts())
			require.NoError(t, err)
			before, err := os.ReadFile(filepath.Join(root, "img"))
			require.NoError(t, err)
			mutate(t, src, 10, 12)

			o := clientOpts()
			o.Atomic = true
			_, err = PushFile(t.Context(), addr, src, "img", o)
			require.Positive(t, faults.Hits(), "no copy_file_range call was faulted")
			if tc.wantErr {
				require.Error(t, err)
				require.Contains(t, err.Error(), "img", "the error names the target")
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
