package localsync_test

import (
	"bufio"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/sparsesync/sparsesync/internal/syncmark"
	"github.com/sparsesync/sparsesync/internal/testutil/layout"
	"github.com/sparsesync/sparsesync/internal/testutil/loopfs"
	"github.com/sparsesync/sparsesync/localsync"
)

// quickLayout is 8 MiB of data in 64 extents over 64 MiB.
func quickLayout() layout.Layout {
	l := layout.Layout{Name: "quick", Size: 64 * mib}
	for i := range int64(64) {
		l.Data = append(l.Data, layout.Range{Off: i * mib, Len: 128 * kib})
	}
	return l
}

// readBytes is what this process has read through read system calls so
// far (/proc/self/io rchar): buffered and O_DIRECT reads alike.
func readBytes(t *testing.T) int64 {
	t.Helper()
	f, err := os.Open("/proc/self/io")
	require.NoError(t, err)
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if v, ok := strings.CutPrefix(s.Text(), "rchar: "); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			require.NoError(t, err)
			return n
		}
	}
	t.Fatal("no rchar in /proc/self/io")
	return 0
}

// TestQuickCheckReadsNothing: a re-sync of an unchanged source into the
// destination a verified copy left ends without reading either file, says
// so, and the destination is still exact; --full-compare reads both. Not
// parallel: the read count is the whole process's.
func TestQuickCheckReadsNothing(t *testing.T) {
	ctx := context.Background()
	for _, atomic := range []bool{false, true} {
		t.Run(map[bool]string{false: "in-place", true: "atomic"}[atomic], func(t *testing.T) {
			dir := t.TempDir()
			src, dst := filepath.Join(dir, "src"), filepath.Join(dir, "dst")
			l := quickLayout()
			layout.Create(t, src, l)
			opts := &localsync.Options{Method: localsync.MethodReadWrite, Atomic: atomic}
			st, err := localsync.Copy(ctx, src, dst, opts)
			require.NoError(t, err)
			require.False(t, st.QuickCheck, "a first copy")

			before := readBytes(t)
			st, err = localsync.Copy(ctx, src, dst, opts)
			read := readBytes(t) - before
			require.NoError(t, err)
			require.True(t, st.QuickCheck, "unchanged since a verified copy: %+v", st)
			require.Less(t, read, 64*kib, "the quick check read %d bytes", read)
			require.Equal(t, l.DataBytes(), st.DataBytes)
			require.Equal(t, l.DataBytes(), st.UnchangedBytes)
			require.Zero(t, st.CopiedBytes+st.PunchedBytes)
			checkStatsAdd(t, st)
			checkSame(t, src, dst)

			full := *opts
			full.FullCompare = true
			before = readBytes(t)
			st, err = localsync.Copy(ctx, src, dst, &full)
			read = readBytes(t) - before
			require.NoError(t, err)
			require.False(t, st.QuickCheck)
			// In place it compares both files; atomic, where the old copy
			// cannot be cloned, it copies the source into a new file.
			require.GreaterOrEqual(t, read, l.DataBytes(), "a full compare reads")
			require.Equal(t, l.DataBytes(), st.DataBytes)

			// CopyFile over held files has the quick check too.
			sf, err := os.Open(src)
			require.NoError(t, err)
			defer sf.Close()
			df, err := os.OpenFile(dst, os.O_RDWR, 0)
			require.NoError(t, err)
			defer df.Close()
			before = readBytes(t)
			st, err = localsync.CopyFile(ctx, sf, df, &localsync.Options{})
			read = readBytes(t) - before
			require.NoError(t, err)
			require.True(t, st.QuickCheck)
			require.Less(t, read, 64*kib)
		})
	}
}

// TestQuickCheckSeesChanges: every change since the marked copy, made at
// once (in the same clock tick as the copy's end where the machine is fast
// enough), makes the next copy compare, and the result is exact.
func TestQuickCheckSeesChanges(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		name   string
		change func(t *testing.T, src, dst string, round int) (newSrc string)
		opts   *localsync.Options
	}{
		{"source written in place", func(t *testing.T, src, _ string, round int) string {
			writeAt(t, src, 5*mib+int64(round), []byte{byte(round + 1), 0xAB})
			return src
		}, &localsync.Options{}},
		{"destination written behind our back", func(t *testing.T, _, dst string, round int) string {
			writeAt(t, dst, 7*mib+int64(round), []byte{0xCD})
			return ""
		}, &localsync.Options{}},
		{"destination hole written", func(t *testing.T, _, dst string, round int) string {
			writeAt(t, dst, 9*mib+512*kib+int64(round)*4*kib, []byte{1})
			return ""
		}, &localsync.Options{}},
		{"destination truncated and restored", func(t *testing.T, _, dst string, _ int) string {
			require.NoError(t, os.Truncate(dst, 32*mib))
			require.NoError(t, os.Truncate(dst, 64*mib))
			return ""
		}, &localsync.Options{}},
		{"destination replaced with its copy, mark and all", func(t *testing.T, _, dst string, round int) string {
			b := fileBytes(t, dst)
			mark := make([]byte, 1024)
			n, err := unix.Getxattr(dst, syncmark.Attr, mark)
			require.NoError(t, err)
			b[3*mib] ^= 0xFF // a different file that carries the old mark
			tmp := dst + ".new"
			require.NoError(t, os.WriteFile(tmp, b, 0o644))
			require.NoError(t, unix.Setxattr(tmp, syncmark.Attr, mark[:n], 0))
			fi, err := os.Stat(dst)
			require.NoError(t, err)
			require.NoError(t, os.Chtimes(tmp, fi.ModTime(), fi.ModTime())) // and its mtime
			require.NoError(t, os.Rename(tmp, dst))
			return ""
		}, &localsync.Options{}},
		{"another source with the same bytes", func(t *testing.T, src, _ string, round int) string {
			other := src + ".other" + strconv.Itoa(round)
			layout.Create(t, other, quickLayout())
			writeAt(t, other, 2*mib, []byte{byte(round), 0xEE})
			return other
		}, &localsync.Options{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			src, dst := filepath.Join(dir, "src"), filepath.Join(dir, "dst")
			layout.Create(t, src, quickLayout())
			_, err := localsync.Copy(ctx, src, dst, tc.opts)
			require.NoError(t, err)
			for round := range 5 {
				s := src
				if n := tc.change(t, src, dst, round); n != "" {
					s = n
				}
				st, err := localsync.Copy(ctx, s, dst, tc.opts)
				require.NoError(t, err)
				require.False(t, st.QuickCheck, "round %d: a changed file passed the quick check", round)
				checkSame(t, s, dst)
				src = s
			}
		})
	}
}

// TestQuickCheckNeedsMatchingShape: a mark from a copy that kept zero
// blocks as data does not stand for a copy asked to make them holes, and a
// copy that did not sync leaves no mark.
func TestQuickCheckNeedsMatchingShape(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	src, dst := filepath.Join(dir, "src"), filepath.Join(dir, "dst")
	layout.Create(t, src, quickLayout())
	f, err := os.OpenFile(src, os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = f.WriteAt(make([]byte, 64*kib), 8*mib) // zeros written as data
	require.NoError(t, err)
	require.NoError(t, f.Close())
	_, err = localsync.Copy(ctx, src, dst, &localsync.Options{})
	require.NoError(t, err)
	st, err := localsync.Copy(ctx, src, dst, &localsync.Options{DetectZeros: true})
	require.NoError(t, err)
	require.False(t, st.QuickCheck, "zero detection asked: compare")
	require.Equal(t, 64*kib, st.ZeroBytes)
	st, err = localsync.Copy(ctx, src, dst, &localsync.Options{DetectZeros: true})
	require.NoError(t, err)
	require.True(t, st.QuickCheck, "the same shape again")

	nosync := filepath.Join(dir, "nosync")
	_, err = localsync.Copy(ctx, src, nosync, &localsync.Options{NoSync: true})
	require.NoError(t, err)
	st, err = localsync.Copy(ctx, src, nosync, &localsync.Options{})
	require.NoError(t, err)
	require.False(t, st.QuickCheck, "a copy without fdatasync leaves no mark")
}

// copyTwice copies quickLayout into dir twice and returns the second copy's
// stats, having checked the result.
func copyTwice(t *testing.T, dir string) localsync.Stats {
	t.Helper()
	ctx := context.Background()
	src, dst := filepath.Join(dir, "src"), filepath.Join(dir, "dst")
	layout.Create(t, src, quickLayout())
	_, err := localsync.Copy(ctx, src, dst, &localsync.Options{})
	require.NoError(t, err)
	st, err := localsync.Copy(ctx, src, dst, &localsync.Options{})
	require.NoError(t, err)
	require.Equal(t, st.DataBytes, st.UnchangedBytes)
	checkSameBytes(t, src, dst)
	return st
}

// TestQuickCheckWithoutXattrs: where the destination cannot keep the mark
// (a filesystem without user extended attributes, or one that refuses to
// read it back), every copy compares, and is exact.
func TestQuickCheckWithoutXattrs(t *testing.T) {
	resync := func(t *testing.T, dir string) {
		t.Helper()
		require.False(t, copyTwice(t, dir).QuickCheck)
	}
	for _, hook := range []string{"setxattr", "getxattr"} {
		t.Run(hook+" unsupported", func(t *testing.T) {
			if hook == "setxattr" {
				old := *syncmark.FsetxattrHook
				t.Cleanup(func() { *syncmark.FsetxattrHook = old })
				*syncmark.FsetxattrHook = func(int, string, []byte, int) error { return syscall.ENOTSUP }
			} else {
				old := *syncmark.FgetxattrHook
				t.Cleanup(func() { *syncmark.FgetxattrHook = old })
				*syncmark.FgetxattrHook = func(int, string, []byte) (int, error) { return 0, syscall.ENOTSUP }
			}
			resync(t, t.TempDir())
		})
	}
	t.Run("ramfs", func(t *testing.T) {
		if os.Geteuid() != 0 {
			t.Skip("mounting ramfs (no user extended attributes) needs root")
		}
		dir := t.TempDir()
		if err := unix.Mount("ramfs", dir, "ramfs", 0, ""); err != nil {
			t.Skipf("cannot mount ramfs: %v", err)
		}
		t.Cleanup(func() { unix.Unmount(dir, 0) })
		resync(t, dir)
	})
}

// TestQuickCheckOnEveryFilesystem: the mark is kept, and found, on each
// filesystem of the matrix (tmpfs keeps user extended attributes since
// Linux 6.6), cloning filesystems included.
func TestQuickCheckOnEveryFilesystem(t *testing.T) {
	runAll(t, 512*mib, func(t *testing.T, kind loopfs.Kind, dir string) {
		st := copyTwice(t, dir)
		var u unix.Utsname
		_ = unix.Uname(&u)
		if kind == loopfs.Tmpfs && strings.HasPrefix(unix.ByteSliceToString(u.Release[:]), "5.") {
			t.Skip("tmpfs has no user extended attributes before Linux 6.6")
		}
		require.True(t, st.QuickCheck, "%s keeps the mark", kind)
	})
}
