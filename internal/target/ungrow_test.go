package target

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// Ungrow gives back the old size only when nothing reached past it, and
// never after Publish.
func TestUngrow(t *testing.T) {
	for _, c := range []struct {
		name     string
		write    int64 // offset of a 4 KiB write after growing, -1 for none
		publish  bool
		wantSize int64
	}{
		{"nothing written", -1, false, 10_000},
		{"written below the old end", 0, false, 10_000},
		{"written past the old end", 1 << 20, false, 8 << 20},
		{"published", -1, true, 8 << 20},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "dst")
			require.NoError(t, os.WriteFile(p, make([]byte, 10_000), 0o600))
			f, err := Create(p, nil)
			require.NoError(t, err)
			defer f.Close()
			require.NoError(t, f.SetSize(8<<20))
			if c.write >= 0 {
				_, err := f.WriteAt(make([]byte, 4096), c.write)
				require.NoError(t, err)
			}
			if c.publish {
				require.NoError(t, f.Publish(false))
			}
			require.NoError(t, f.Ungrow())
			fi, err := os.Stat(p)
			require.NoError(t, err)
			require.Equal(t, c.wantSize, fi.Size())
		})
	}
}
