package coldread

import (
	"bufio"
	"bytes"
	"os"
	"strconv"
	"strings"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"
)

// TestAlignedBuffers: k buffers of n bytes each, aligned for direct reads,
// their capacities rounded up to Align and not overlapping (a worker's
// compare reads must not land in another's buffer), from memory the
// kernel was asked to back with huge pages where THP is on: the kernel's
// own account (/proc/self/smaps: VmFlags "hg") is the oracle.
func TestAlignedBuffers(t *testing.T) {
	for _, tc := range []struct{ k, n int }{{1, 1}, {8, 1 << 20}, {3, 1<<20 + 1}, {32, 1 << 20}} {
		bufs := AlignedBuffers(tc.k, tc.n)
		require.Len(t, bufs, tc.k)
		c := (tc.n + Align - 1) / Align * Align
		for i, b := range bufs {
			require.Len(t, b, tc.n)
			require.Equal(t, c, cap(b))
			require.Zero(t, uintptr(unsafe.Pointer(unsafe.SliceData(b)))%Align)
			b = b[:cap(b)] // a direct read fills the capacity
			for j := range b {
				b[j] = byte(i + 1)
			}
		}
		for i, b := range bufs {
			require.Equal(t, c, bytes.Count(b[:cap(b)], []byte{byte(i + 1)}), "buffer %d was written by another", i)
		}
	}
	bufs := AlignedBuffers(8, 1<<20)
	addr := uintptr(unsafe.Pointer(unsafe.SliceData(bufs[0])))
	require.Zero(t, addr%hugePage, "the slab starts on a huge page")

	mode, err := os.ReadFile("/sys/kernel/mm/transparent_hugepage/enabled")
	if err != nil || strings.Contains(string(mode), "[never]") {
		t.Skipf("transparent huge pages are off here (%q, %v): nothing to ask the kernel", strings.TrimSpace(string(mode)), err)
	}
	flags := vmFlags(t, addr)
	require.Contains(t, strings.Fields(flags), "hg", "VmFlags of the mapping holding the buffers: %q", flags)
}

// vmFlags returns the VmFlags line of the mapping of this process that
// holds addr, from /proc/self/smaps.
func vmFlags(t *testing.T, addr uintptr) string {
	f, err := os.Open("/proc/self/smaps")
	require.NoError(t, err)
	defer f.Close()
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if lo, hi, ok := strings.Cut(strings.Fields(line + " ")[0], "-"); ok && !strings.HasSuffix(lo, ":") {
			a, err1 := strconv.ParseUint(lo, 16, 64)
			b, err2 := strconv.ParseUint(hi, 16, 64)
			if err1 == nil && err2 == nil {
				in = uint64(addr) >= a && uint64(addr) < b
				continue
			}
		}
		if in {
			if v, ok := strings.CutPrefix(line, "VmFlags:"); ok {
				return strings.TrimSpace(v)
			}
		}
	}
	require.NoError(t, sc.Err())
	t.Fatalf("no mapping holds %#x", addr)
	return ""
}
