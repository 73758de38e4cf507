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
