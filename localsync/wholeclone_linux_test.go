package localsync

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sparsesync/sparsesync/internal/testutil/layout"
	"github.com/sparsesync/sparsesync/internal/testutil/loopfs"
)

// TestNewCopyIsOneClone: a new destination on the source's reflink
// filesystem, with the options `sparsesync local` uses by default and with
// --reflink always, is made by exactly one whole-file FICLONE: no
// FICLONERANGE (neither per range nor the probe that --reflink always needs
// only for a destination that has data), no copy_file_range, no data read.
// The result shares every block with the source and is exact.
func TestNewCopyIsOneClone(t *testing.T) {
	oneExtent := layout.Layout{Name: "one-extent", Size: 64 * mib, Data: layout.Ranges(0, 64*mib)}
	for _, kind := range []loopfs.Kind{loopfs.XFS, loopfs.Btrfs} {
		t.Run(string(kind), func(t *testing.T) {
			dir := loopfs.Mount(t, kind, gib)
			for _, tc := range []struct {
				name string
				l    layout.Layout
				opts Options
			}{
				{"one extent", oneExtent, Options{}},
				{"one extent, reflink always", oneExtent, Options{Reflink: ReflinkAlways}},
				{"one extent, method reflink", oneExtent, Options{Method: MethodReflink}},
				{"sparse", sample, Options{}},
				{"sparse, reflink always", sample, Options{Reflink: ReflinkAlways}},
			} {
				t.Run(tc.name, func(t *testing.T) {
					src, dst := filepath.Join(dir, "src"), filepath.Join(dir, "dst")
					t.Cleanup(func() { os.Remove(src); os.Remove(dst) })
					layout.Create(t, src, tc.l)
					f, err := os.Open(src)
					require.NoError(t, err)
					require.NoError(t, f.Sync()) // no dirty pages for FICLONE to flush
					require.NoError(t, f.Close())
					c := recordCalls(t)
					read := readBytes(t)
					st, err := Copy(t.Context(), src, dst, c.opts(&tc.opts))
					read = readBytes(t) - read
					require.NoError(t, err)
					require.Equal(t, int64(1), c.ficlone(), "one whole-file FICLONE")
					require.Zero(t, c.ficloneRange(), "no FICLONERANGE")
					require.Zero(t, c.cfr(), "no copy_file_range")
					require.Less(t, read, int64(64<<10), "bytes read by the copy")
					require.Equal(t, MethodReflink, st.Method)
					require.Equal(t, st.DataBytes, st.ClonedBytes)
					require.Zero(t, st.CopiedBytes)
					checkCopy(t, src, dst)
					requireAllShared(t, dst)
				})
			}
		})
	}
}

// TestReflinkAlwaysRefusesBeforeWriting: --reflink always onto a new
// destination where cloning is impossible fails with ErrReflinkUnsupported
// and leaves no destination, now that the whole-file FICLONE (not a probe)
// is what finds out; onto a destination with data it still probes first and
// leaves that destination as it was.
func TestReflinkAlwaysRefusesBeforeWriting(t *testing.T) {
	for _, pair := range [][2]loopfs.Kind{{loopfs.Ext4, loopfs.Ext4}, {loopfs.XFS, loopfs.Btrfs}} {
		t.Run(string(pair[0])+"-to-"+string(pair[1]), func(t *testing.T) {
			sdir := loopfs.Mount(t, pair[0], gib)
			ddir := sdir
			if pair[1] != pair[0] {
				ddir = loopfs.Mount(t, pair[1], gib)
			}
			src := filepath.Join(sdir, "src")
			layout.Create(t, src, sample)
			dst := filepath.Join(ddir, "new")
			_, err := Copy(t.Context(), src, dst, &Options{Reflink: ReflinkAlways})
			require.ErrorIs(t, err, ErrReflinkUnsupported)
			require.NoFileExists(t, dst)

			old := filepath.Join(ddir, "old")
			want := bytes.Repeat([]byte{9}, 3*int(mib))
			require.NoError(t, os.WriteFile(old, want, 0o644))
			_, err = Copy(t.Context(), src, old, &Options{Reflink: ReflinkAlways})
			require.ErrorIs(t, err, ErrReflinkUnsupported)
			got, rerr := os.ReadFile(old)
			require.NoError(t, rerr)
			require.Equal(t, want, got, "the old destination was written")
		})
	}
}

// readBytes is the bytes this process has read so far (rchar in
// /proc/self/io: read, pread and the like, whatever they hit).
func readBytes(t *testing.T) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/self/io")
	require.NoError(t, err)
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "rchar: "); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			require.NoError(t, err)
			return n
		}
	}
	t.Fatal("no rchar in /proc/self/io")
	return 0
}

// TestResyncReclonesWhenSharingOnlyWithOthers: a re-sync of a source of
// many small extents onto a destination whose blocks are shared, but with
// another file only (here the older file it was cloned from, as after last
// night's re-sync of a source since copied anew), is one whole-file FICLONE
// onto the emptied destination, as onto one that shares nothing: no block of
// it is the source's, so comparing range by range would skip nothing. A
// destination that does share the source's blocks keeps the range-by-range
// re-sync, which skips them.
func TestResyncReclonesWhenSharingOnlyWithOthers(t *testing.T) {
	many := func(shift int64) layout.Layout {
		l := layout.Layout{Size: 2 * recloneWholeMin * 8192}
		for i := range int64(2 * recloneWholeMin) {
			l.Data = append(l.Data, layout.Range{Off: i*8192 + shift, Len: 4096})
		}
		return l
	}
	for _, kind := range []loopfs.Kind{loopfs.XFS, loopfs.Btrfs} {
		t.Run(string(kind), func(t *testing.T) {
			dir := loopfs.Mount(t, kind, gib)
			src, older, dst := filepath.Join(dir, "src"), filepath.Join(dir, "older"), filepath.Join(dir, "dst")
			layout.Create(t, src, many(0))
			layout.Create(t, older, many(4096)) // other extents, other bytes
			_, err := Copy(t.Context(), older, dst, nil)
			require.NoError(t, err)
			requireAllShared(t, dst) // with older, not with src

			c := recordCalls(t)
			st, err := Copy(t.Context(), src, dst, c.opts(nil))
			require.NoError(t, err)
			checkCopy(t, src, dst)
			require.Equal(t, int64(1), c.ficlone(), "one whole-file FICLONE")
			require.LessOrEqual(t, c.ficloneRange(), int64(1), "no FICLONERANGE but the probe")
			require.Zero(t, c.cfr(), "no copy_file_range")
			require.Equal(t, st.DataBytes, st.ClonedBytes)
			requireAllShared(t, dst)

			// Now dst is the source's: change three extents of the source
			// and re-sync; the rest is skipped as already the source's.
			f, err := os.OpenFile(src, os.O_RDWR, 0)
			require.NoError(t, err)
			for _, off := range []int64{0, 800 * 8192, 2000 * 8192} {
				_, err = f.WriteAt(bytes.Repeat([]byte{0xa5}, 4096), off)
				require.NoError(t, err)
			}
			require.NoError(t, f.Sync())
			require.NoError(t, f.Close())
			c = recordCalls(t)
			st, err = Copy(t.Context(), src, dst, c.opts(nil))
			require.NoError(t, err)
			// The source's rewritten blocks left XFS copy-on-write
			// preallocation around them: unwritten extents, which read as
			// zeros and which a bare SEEK_DATA walk calls data (sparsesync
			// calls them holes). So the destination's holes are checked
			// against the layout, and the bytes against the source.
			require.Equal(t, sum(t, src), sum(t, dst))
			require.Equal(t, many(0).Data, layout.SeekWalk(t, dst))
			require.Zero(t, c.ficlone(), "no whole-file FICLONE onto a destination that shares the source's blocks")
			require.Equal(t, int64(3*4096), st.CopiedBytes+st.ClonedBytes, "only the changed extents moved")
		})
	}
}
