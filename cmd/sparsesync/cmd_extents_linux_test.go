package main

// The matrix compares with internal/testutil/layout's SEEK_DATA/SEEK_HOLE walk,
// which is Linux's.

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sparsesync/sparsesync/internal/testutil/layout"
	"github.com/sparsesync/sparsesync/internal/testutil/loopfs"
)

// TestExtentsJSONMatrix is the acceptance check: on ext4, XFS, btrfs and
// tmpfs, `extents --json` agrees with a plain SEEK_DATA/SEEK_HOLE walk for
// the standard layouts (empty, 1 GiB hole, last byte only, unaligned size,
// 100,000 extents). The 100,000-extent layout runs on the loop filesystems
// only with SPARSESYNC_HEAVY=1 (10,000 extents otherwise): sparse's
// TestWalkMatrix walks it there in every run, and making it on btrfs is
// most of this test's time.
func TestExtentsJSONMatrix(t *testing.T) {
	loopfs.Run(t, loopfs.DefaultSize, func(t *testing.T, kind loopfs.Kind, dir string) {
		for _, l := range layout.OnLoop(layout.Standard(), kind != loopfs.Tmpfs) {
			t.Run(l.Name, func(t *testing.T) {
				path := filepath.Join(dir, l.Name)
				layout.Create(t, path, l)
				syncFile(t, path) // so allocation stops changing under writeback
				stdout, stderr, code, _ := runCLI(t, "extents", "--json", path)
				require.Equal(t, 0, code, stderr)
				require.Empty(t, stderr)
				var doc extentsJSON
				dec := json.NewDecoder(strings.NewReader(stdout))
				dec.DisallowUnknownFields()
				require.NoError(t, dec.Decode(&doc))
				require.False(t, dec.More(), "more than one JSON value on stdout")
				require.Equal(t, path, doc.Path)
				require.Equal(t, l.Size, doc.Size)
				var want []extentJSON
				var data int64
				for _, r := range layout.SeekWalk(t, path) {
					want = append(want, extentJSON{r.Off, r.Len})
					data += r.Len
				}
				if want == nil {
					want = []extentJSON{}
				}
				require.Equal(t, want, doc.Extents)
				require.Equal(t, data, doc.DataBytes)
				st, err := os.Stat(path)
				require.NoError(t, err)
				require.Equal(t, st.Sys().(*syscallStat).Blocks*512, doc.AllocatedBytes)
				require.NoError(t, os.Remove(path))
			})
		}
	})
}
