// Package layout builds sparse test files from a list of data ranges and
// walks files the plain way (a bare SEEK_DATA/SEEK_HOLE loop) so tests can
// compare the real code against an independent reference.
//
// It imports nothing of ours, so every package's tests can use it.
package layout

import (
	"os"
	"testing"
)

// Range is a byte range [Off, Off+Len).
type Range struct{ Off, Len int64 }

// End returns the first offset after the range.
func (r Range) End() int64 { return r.Off + r.Len }

// Layout is a file to build: its size and where its data goes.
type Layout struct {
	Name string
	Size int64
	Data []Range
}

// DataBytes returns the bytes of data the layout writes.
func (l Layout) DataBytes() int64 {
	var n int64
	for _, r := range l.Data {
		n += r.Len
	}
	return n
}

// Standard returns the layouts every sparse-aware component must get right:
// an empty file, a 1 GiB hole, only the last byte, only the first byte, a size
// that is not a block multiple with unaligned data, and 100,000 small extents.
func Standard() []Layout {
	const gib = 1 << 30
	many := Layout{Name: "100k-extents", Size: 100_000 * 8192}
	for i := range int64(100_000) {
		many.Data = append(many.Data, Range{i * 8192, 4096})
	}
	return []Layout{
		{Name: "empty"},
		{Name: "all-hole-1GiB", Size: gib},
		{Name: "last-byte-1GiB", Size: gib, Data: []Range{{gib - 1, 1}}},
		{Name: "first-byte-1GiB", Size: gib, Data: []Range{{0, 1}}},
		{Name: "unaligned-10000001", Size: 10_000_001, Data: []Range{{1000, 4000}, {1_000_003, 499_998}, {9_999_000, 1001}}},
		many,
	}
}

// Pattern fills b with the bytes a layout writes at offset off: a
// deterministic, never-zero function of the offset, so a copy can be checked
// byte for byte and no written byte looks like a hole.
func Pattern(b []byte, off int64) {
	for i := range b {
		x := uint64(off+int64(i)) * 0x9E3779B97F4A7C15
		b[i] = byte(x>>56) | 1
	}
}

// Create writes l at path: it sets the size first (so XFS makes no
// speculative preallocation) and then writes every data range with Pattern.
// The data is left unflushed, as a writer would leave it.
func Create(t testing.TB, path string, l Layout) {
	t.Helper()
	if err := Write(path, l); err != nil {
		t.Fatalf("layout %s: %v", l.Name, err)
	}
}

// Write is Create without testing.TB, for benchmarks' setup and tools.
func Write(path string, l Layout) (err error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}()
	if err := f.Truncate(l.Size); err != nil {
		return err
	}
	buf := make([]byte, 1<<20)
	for _, r := range l.Data {
		for off := r.Off; off < r.End(); {
			n := min(int64(len(buf)), r.End()-off)
			Pattern(buf[:n], off)
			if _, err := f.WriteAt(buf[:n], off); err != nil {
				return err
			}
			off += n
		}
	}
	return nil
}

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
		out = append(out, Range{off, end - off})
	}
	return out
}

// Ranges builds ranges from (offset, length) pairs.
func Ranges(offLen ...int64) []Range {
	var out []Range
	for i := 0; i+1 < len(offLen); i += 2 {
		out = append(out, Range{offLen[i], offLen[i+1]})
	}
	return out
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
