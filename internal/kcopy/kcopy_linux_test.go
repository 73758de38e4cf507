package kcopy

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// pair makes a source of n random bytes and an empty destination of the
// same size in a temporary directory.
func pair(t *testing.T, n int) (src, dst *os.File, data []byte) {
	t.Helper()
	dir := t.TempDir()
	data = make([]byte, n)
	r := rand.New(rand.NewPCG(uint64(n), 3))
	for i := range data {
		data[i] = byte(r.Uint32())
	}
	require.NoError(t, os.WriteFile(filepath.Join(dir, "src"), data, 0o600))
	src, err := os.Open(filepath.Join(dir, "src"))
	require.NoError(t, err)
	t.Cleanup(func() { src.Close() })
	dst, err = os.OpenFile(filepath.Join(dir, "dst"), os.O_RDWR|os.O_CREATE, 0o600)
	require.NoError(t, err)
	t.Cleanup(func() { dst.Close() })
	require.NoError(t, dst.Truncate(int64(n)))
	return src, dst, data
}

func contents(t *testing.T, f *os.File) []byte {
	t.Helper()
	b, err := os.ReadFile(f.Name())
	require.NoError(t, err)
	return b
}

// hookCFR replaces copy_file_range for the test with fn(call, real).
func hookCFR(t *testing.T, fn func(call int, n int, real func() (int, error)) (int, error)) {
	t.Helper()
	saved := copyFileRange
	t.Cleanup(func() { copyFileRange = saved })
	call := 0
	copyFileRange = func(rfd int, roff *int64, wfd int, woff *int64, n int, fl int) (int, error) {
		call++
		return fn(call, n, func() (int, error) { return saved(rfd, roff, wfd, woff, n, fl) })
	}
}

func TestCopyRangeExact(t *testing.T) {
	src, dst, data := pair(t, 3<<20+123)
	done, handled, err := CopyRange(t.Context(), src, OS(dst), 4096, int64(len(data))-4096)
	if !handled {
		t.Skipf("copy_file_range not handled here: %v", err)
	}
	require.NoError(t, err)
	require.Equal(t, int64(len(data))-4096, done)
	got := contents(t, dst)
	require.Equal(t, make([]byte, 4096), got[:4096], "bytes before the range were written")
	require.True(t, bytes.Equal(data[4096:], got[4096:]))
}

// TestCopyRangeErrnos checks the errno classification: "cannot" errnos and
// a 0-byte first call are not handled (nothing written); the same after
// data, a 0 after data and real errnos are errors; EINTR is retried.
func TestCopyRangeErrnos(t *testing.T) {
	const n = 1 << 20
	cases := []struct {
		name        string
		fn          func(call, n int, real func() (int, error)) (int, error)
		handled     bool
		wantErr     error
		wantDone    int64
		wantWritten bool
	}{
		{name: "exdev-first", fn: func(int, int, func() (int, error)) (int, error) { return 0, unix.EXDEV }, wantErr: unix.EXDEV},
		{name: "eio-first", fn: func(int, int, func() (int, error)) (int, error) { return 0, unix.EIO }, wantErr: unix.EIO},
		{name: "enosys-first", fn: func(int, int, func() (int, error)) (int, error) { return 0, unix.ENOSYS }, wantErr: unix.ENOSYS},
		{name: "zero-first", fn: func(int, int, func() (int, error)) (int, error) { return 0, nil }},
		{name: "enospc-first", fn: func(int, int, func() (int, error)) (int, error) { return 0, unix.ENOSPC }, handled: true, wantErr: unix.ENOSPC},
		{name: "eintr", handled: true, wantDone: n, wantWritten: true, fn: func(call, _ int, real func() (int, error)) (int, error) {
			if call%2 == 1 {
				return 0, unix.EINTR
			}
			return real()
		}},
		{name: "einval-after-data", handled: true, wantErr: ErrPartial, wantDone: 4096, fn: func(call, _ int, real func() (int, error)) (int, error) {
			if call == 1 {
				return 4096, nil // pretend a short copy, then fail
			}
			return 0, unix.EINVAL
		}},
		{name: "eio-after-data", handled: true, wantErr: unix.EIO, wantDone: 4096, fn: func(call, _ int, real func() (int, error)) (int, error) {
			if call == 1 {
				return 4096, nil
			}
			return 0, unix.EIO
		}},
		{name: "zero-after-data", handled: true, wantErr: io.ErrUnexpectedEOF, wantDone: 4096, fn: func(call, _ int, real func() (int, error)) (int, error) {
			if call == 1 {
				return 4096, nil
			}
			return 0, nil
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			src, dst, data := pair(t, n)
			hookCFR(t, tc.fn)
			done, handled, err := CopyRange(t.Context(), src, OS(dst), 0, n)
			require.Equal(t, tc.handled, handled, "handled (err %v)", err)
			require.Equal(t, tc.wantDone, done)
			if tc.wantErr != nil {
				require.ErrorIs(t, err, tc.wantErr)
			} else {
				require.NoError(t, err)
			}
			if tc.wantWritten {
				require.Equal(t, data, contents(t, dst))
			}
			if !handled {
				require.Equal(t, make([]byte, n), contents(t, dst), "not handled, yet written")
			}
		})
	}
}

// TestCopyRangeCap asks for more than one call may copy: no call asks for
// more than MaxCopyRange, and the calls together cover the range.
func TestCopyRangeCap(t *testing.T) {
	src, dst, _ := pair(t, 4096)
	var lens []int
	var off int64
	hookCFR(t, func(_, n int, _ func() (int, error)) (int, error) {
		lens = append(lens, n)
		return n, nil // nothing real: only the requested lengths matter
	})
	const total = 2*MaxCopyRange + 5
	done, handled, err := CopyRange(t.Context(), src, OS(dst), off, total)
	require.NoError(t, err)
	require.True(t, handled)
	require.Equal(t, int64(total), done)
	require.Equal(t, []int{MaxCopyRange, MaxCopyRange, 5}, lens)
}

// TestCopyFallsBack: when the kernel cannot, Copy reads and writes, and the
// result is exact.
func TestCopyFallsBack(t *testing.T) {
	src, dst, data := pair(t, 5<<20+7)
	hookCFR(t, func(int, int, func() (int, error)) (int, error) { return 0, unix.EXDEV })
	kernel, copied, err := Copy(t.Context(), src, OS(dst), 0, int64(len(data)), make([]byte, 64<<10))
	require.NoError(t, err)
	require.Zero(t, kernel)
	require.Equal(t, int64(len(data)), copied)
	require.Equal(t, data, contents(t, dst))
}

// TestCopyStopsOnPartialFailure: a kernel copy that fails after data must
// not be hidden by the fallback.
func TestCopyStopsOnPartialFailure(t *testing.T) {
	src, dst, data := pair(t, 1<<20)
	hookCFR(t, func(call, _ int, real func() (int, error)) (int, error) {
		if call == 1 {
			return 4096, nil
		}
		return 0, unix.EOPNOTSUPP
	})
	_, copied, err := Copy(t.Context(), src, OS(dst), 0, int64(len(data)), nil)
	require.ErrorIs(t, err, ErrPartial)
	require.Zero(t, copied)
}

func TestReadWriteShortSource(t *testing.T) {
	src, dst, data := pair(t, 10000)
	done, err := ReadWrite(t.Context(), src, dst, 0, 20000, make([]byte, 4096))
	require.ErrorIs(t, err, io.ErrUnexpectedEOF)
	require.Equal(t, int64(8192), done)
	require.Equal(t, data[:8192], contents(t, dst)[:8192])
}

func TestCloneErrnos(t *testing.T) {
	src, dst, _ := pair(t, 8192)
	saved, savedR := ioctlFiclone, ioctlFicloneRange
	t.Cleanup(func() { ioctlFiclone, ioctlFicloneRange = saved, savedR })
	for _, tc := range []struct {
		errno   error
		handled bool
	}{{unix.EXDEV, false}, {unix.EOPNOTSUPP, false}, {unix.EINVAL, false}, {unix.EIO, true}, {unix.ENOSPC, true}, {nil, true}} {
		calls := 0
		ioctlFiclone = func(int, int) error {
			if calls++; calls == 1 {
				return unix.EINTR
			}
			return tc.errno
		}
		ioctlFicloneRange = func(int, *unix.FileCloneRange) error { return ioctlFiclone(0, 0) }
		handled, err := CloneFile(src, dst, nil)
		require.Equal(t, tc.handled, handled, "FICLONE %v", tc.errno)
		require.True(t, errors.Is(err, tc.errno) || err == tc.errno, "FICLONE %v: %v", tc.errno, err)
		require.Equal(t, 2, calls, "EINTR not retried")
		calls = 0
		handled, err = CloneRange(src, dst, 0, 4096, nil)
		require.Equal(t, tc.handled, handled, "FICLONERANGE %v", tc.errno)
		require.True(t, errors.Is(err, tc.errno) || err == tc.errno, "FICLONERANGE %v: %v", tc.errno, err)
	}
}
