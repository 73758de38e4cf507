package localsync_test

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sparsesync/sparsesync/internal/layout"
	"github.com/sparsesync/sparsesync/internal/loopfs"
	"github.com/sparsesync/sparsesync/localsync"
)

func TestSmoke(t *testing.T) {
	loopfs.Run(t, 2*gib, func(t *testing.T, kind loopfs.Kind, dir string) {
		l := scattered("s", 256*mib, 10, 1)
		src, dst := filepath.Join(dir, "src"), filepath.Join(dir, "dst")
		layout.Create(t, src, l)
		st, err := localsync.Copy(t.Context(), src, dst, localsync.Options{})
		require.NoError(t, err)
		t.Logf("%s full: %+v", kind, st)
		checkSame(t, src, dst)
		checkStatsAdd(t, st)
		st, err = localsync.Copy(t.Context(), src, dst, localsync.Options{})
		require.NoError(t, err)
		t.Logf("%s again: %+v", kind, st)
		checkSame(t, src, dst)
		checkStatsAdd(t, st)
	})
}
