// Package layout is a test helper: it builds sparse test files from a list
// of data ranges (internal/patternfile's types and writer, re-exported) and
// walks files the plain way (a bare SEEK_DATA/SEEK_HOLE loop) so tests can
// compare the real code against an independent reference.
//
// It imports nothing of ours but internal/patternfile, so every package's
// tests can use it. It imports testing: production code must not import it
// (the dependency test in internal/deps_test.go says so).
package layout

import (
	"os"
	"testing"

	"github.com/sparsesync/sparsesync/internal/patternfile"
)

// Range is a byte range [Off, Off+Len).
type Range = patternfile.Range

// Layout is a file to build: its size and where its data goes.
type Layout = patternfile.Layout

// Standard returns the layouts every sparse-aware component must get right:
// an empty file, a 1 GiB hole, only the last byte, only the first byte, a size
// that is not a block multiple with unaligned data, and 100,000 small extents.
func Standard() []Layout {
	const gib = 1 << 30
	many := Layout{Name: "100k-extents", Size: 100_000 * 8192}
	for i := range int64(100_000) {
		many.Data = append(many.Data, Range{Off: i * 8192, Len: 4096})
	}
	return []Layout{
		{Name: "empty"},
		{Name: "all-hole-1GiB", Size: gib},
		{Name: "last-byte-1GiB", Size: gib, Data: []Range{{Off: gib - 1, Len: 1}}},
		{Name: "first-byte-1GiB", Size: gib, Data: []Range{{Off: 0, Len: 1}}},
		{Name: "unaligned-10000001", Size: 10_000_001, Data: []Range{{Off: 1000, Len: 4000}, {Off: 1_000_003, Len: 499_998}, {Off: 9_999_000, Len: 1001}}},
		many,
	}
}

// Pattern fills b with the bytes a layout writes at offset off
// (patternfile.Pattern).
func Pattern(b []byte, off int64) { patternfile.Pattern(b, off) }

// Create writes l at path: it sets the size first (so XFS makes no
// speculative preallocation) and then writes every data range with Pattern.
// The data is left unflushed, as a writer would leave it.
func Create(t testing.TB, path string, l Layout) {
	t.Helper()
	if err := Write(path, l); err != nil {
		t.Fatalf("layout %s: %v", l.Name, err)
	}
}

// Write is Create without testing.TB, for benchmarks' setup and tools
// (patternfile.Write).
func Write(path string, l Layout) error { return patternfile.Write(path, l) }

// BlockRanges returns where a filesystem with the given block size keeps the
// data of l: each range widened to whole blocks (cut at the size), touching
// ranges merged. It is what SEEK_DATA reports for a freshly written layout.
func BlockRanges(l Layout, bs int64) []Range {
	var out []Range
	for _, r := range l.Data {
		off := r.Off - r.Off%bs
		end := min((r.End()+bs-1)/bs*bs, l.Size)
		if n := len(out); n > 0 && off <= out[n-1].End() {
			out[n-1].Len = max(end, out[n-1].End()) - out[n-1].Off
			continue
		}
		out = append(out, Range{Off: off, Len: end - off})
	}
	return out
}

// Ranges builds ranges from (offset, length) pairs.
func Ranges(offLen ...int64) []Range {
	var out []Range
	for i := 0; i+1 < len(offLen); i += 2 {
		out = append(out, Range{Off: offLen[i], Len: offLen[i+1]})
	}
	return out
}

// HeavyEnv is the environment variable that asks tests for their full
// scale (CI sets it to 1).
const HeavyEnv = "SPARSESYNC_HEAVY"

// Heavy reports whether the tests run at full scale (HeavyEnv=1).
func Heavy() bool { return os.Getenv(HeavyEnv) == "1" }

// OnLoop returns ls for a test on a loop filesystem: ls itself with
// HeavyEnv=1, else Lighter(ls). On tmpfs (onLoop false) it is always ls.
func OnLoop(ls []Layout, onLoop bool) []Layout {
	if !onLoop || Heavy() {
		return ls
	}
	return Lighter(ls)
}

// Lighter returns ls with every layout of more than 10,000 extents replaced
// by "10k-extents" (4 KiB of data every 8 KiB): the same walking, batching
// and merging paths at a tenth of the cost. Tests use it on the loop
// filesystems unless SPARSESYNC_HEAVY=1 asks for the full layouts.
func Lighter(ls []Layout) []Layout {
	out := make([]Layout, len(ls))
	for i, l := range ls {
		out[i] = l
		if len(l.Data) > 10_000 {
			few := Layout{Name: "10k-extents", Size: 10_000 * 8192}
			for j := range int64(10_000) {
				few.Data = append(few.Data, Range{Off: j * 8192, Len: 4096})
			}
			out[i] = few
		}
	}
	return out
}
