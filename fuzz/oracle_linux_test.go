package fuzz

import (
	"bytes"
	"encoding/binary"
	"math"
	"os"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/sparsesync/sparsesync/internal/testutil/layout"
	"golang.org/x/sys/unix"
)

// rules says which of the documented rules (docs/local.md, docs/network.md) a result must follow.
type rules struct {
	// keepData: every data range of the source is a data range of the
	// result (localsync without DetectZeros: all-zero data stays data).
	keepData bool
}

// checkResult compares the result at dst with the source at src using only
// plain reads, a plain SEEK_DATA/SEEK_HOLE loop and stat.
func checkResult(t testing.TB, what, src, dst string, r rules) {
	t.Helper()
	want, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	checkBytes(t, what, dst, want)
	settle(t, src)
	settle(t, dst)
	srcData := layout.SeekWalk(t, src)
	dstData := layout.SeekWalk(t, dst)
	// holes stay holes: no result data where the source has none.
	for _, d := range dstData {
		if !within(srcData, d) {
			t.Fatalf("%s: %s has data %v where the source has a hole (source data %v, result data %v)",
				what, dst, d, srcData, dstData)
		}
	}
	if r.keepData {
		for _, s := range subtract(srcData, unwritten(t, src)) {
			if !within(dstData, s) {
				t.Fatalf("%s: %s has a hole in %v where the source has data (source data %v, result data %v)",
					what, dst, s, srcData, dstData)
			}
		}
	}
	checkAllocation(t, what, dst, dstData, blocks(t, src))
}

// settle makes the file's layout the durable one: its data is written back
// and its pages dropped, so that SEEK_DATA does not report what only the
// page cache holds (XFS reports copy-on-write preallocations as data while
// their pages are cached).
func settle(t testing.TB, path string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := unix.Fdatasync(int(f.Fd())); err != nil {
		t.Fatalf("fdatasync %s: %v", path, err)
	}
	if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
		t.Fatalf("fadvise %s: %v", path, err)
	}
	freeCOWBlocks(f)
}

// xfsIocFreeEOFBlocks is XFS_IOC_FREE_EOFBLOCKS, _IOR('X', 58, struct
// xfs_fs_eofblocks) (128 bytes).
const xfsIocFreeEOFBlocks = 0x8080583a

// freeCOWBlocks asks XFS to release, now rather than in its background
// scan, the copy-on-write reservations that writes into reflinked blocks
// leave behind (counted in st_blocks; they are the filesystem's, not the
// sync's). It needs root and does nothing on other filesystems.
func freeCOWBlocks(f *os.File) {
	var sfs unix.Statfs_t
	if unix.Fstatfs(int(f.Fd()), &sfs) != nil || sfs.Type != unix.XFS_SUPER_MAGIC {
		return
	}
	// syncfs first: it also finishes the deferred inactivation of unlinked
	// inodes (an atomic sync's old destination), which still share blocks.
	if unix.Syncfs(int(f.Fd())) != nil {
		return
	}
	var arg [128]byte
	arg[0] = 1 // eof_version
	arg[4] = 1 // eof_flags: XFS_EOF_FLAGS_SYNC
	unix.Syscall(unix.SYS_IOCTL, f.Fd(), xfsIocFreeEOFBlocks, uintptr(unsafe.Pointer(&arg[0])))
}

// unwritten returns the ranges the kernel's FIEMAP marks allocated but
// unwritten (preallocations): they read as zeros, and whether SEEK_DATA
// calls them data depends on the filesystem, so no rule holds them to be
// data. The ioctl is issued here, plainly, not through sparse.Fiemap: the
// oracle shares no code with what it checks. Filesystems without FIEMAP
// (tmpfs) have none.
func unwritten(t testing.TB, path string) []layout.Range {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	const (
		fsIocFiemap      = 0xc020660b // _IOWR('f', 11, struct fiemap)
		extentLast       = 0x1
		extentUnwritten  = 0x800
		headerSize       = 32 // struct fiemap before fm_extents
		extentSize       = 56 // struct fiemap_extent
		extentsPerCall   = 128
		offLogical       = 0
		offLength        = 16
		offFlags         = 40
		offMappedExtents = 20
	)
	buf := make([]byte, headerSize+extentsPerCall*extentSize)
	le := binary.LittleEndian
	var out []layout.Range
	var start uint64
	for {
		clear(buf)
		le.PutUint64(buf[0:], start)                // fm_start
		le.PutUint64(buf[8:], math.MaxUint64-start) // fm_length
		le.PutUint32(buf[24:], extentsPerCall)      // fm_extent_count
		_, _, e := unix.Syscall(unix.SYS_IOCTL, f.Fd(), fsIocFiemap, uintptr(unsafe.Pointer(&buf[0])))
		if e == unix.EOPNOTSUPP || e == unix.ENOTTY {
			return nil
		}
		if e != 0 {
			t.Fatalf("FS_IOC_FIEMAP %s: %v", path, e)
		}
		n := int(le.Uint32(buf[offMappedExtents:]))
		if n == 0 {
			return out
		}
		for i := range n {
			x := buf[headerSize+i*extentSize:]
			logical, length, flags := le.Uint64(x[offLogical:]), le.Uint64(x[offLength:]), le.Uint32(x[offFlags:])
			if flags&extentUnwritten != 0 {
				out = append(out, layout.Range{Off: int64(logical), Len: int64(length)})
			}
			if flags&extentLast != 0 {
				return out
			}
			start = logical + length
		}
	}
}

// subtract returns the parts of the sorted ranges a not covered by b.
func subtract(a, b []layout.Range) []layout.Range {
	var out []layout.Range
	for _, r := range a {
		pos := r.Off
		for _, x := range b {
			if x.End() <= pos || x.Off >= r.End() {
				continue
			}
			if x.Off > pos {
				out = append(out, layout.Range{Off: pos, Len: x.Off - pos})
			}
			pos = max(pos, x.End())
		}
		if pos < r.End() {
			out = append(out, layout.Range{Off: pos, Len: r.End() - pos})
		}
	}
	return out
}

// checkBytes compares the file's bytes with want.
func checkBytes(t testing.TB, what, path string, want []byte) {
	t.Helper()
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("%s: %s is %d bytes, want %d", what, path, len(got), len(want))
	}
	if !bytes.Equal(got, want) {
		i := 0
		for got[i] == want[i] {
			i++
		}
		t.Fatalf("%s: %s differs from the source first at byte %d (%#x, want %#x)", what, path, i, got[i], want[i])
	}
}

// checkAllocation: the blocks the file holds (st_blocks) are its data,
// rounded to 4 KiB, plus a small allowance for the filesystem's own
// metadata blocks (ext4 extent blocks, XFS bmap btree blocks). Blocks
// allocated over holes (preallocations left behind, zeros written instead
// of punched) exceed it.
//
// A result may also hold what the source holds (a reflink of a source with
// preallocated ranges shares them): srcBlocks, the source's allocation, is
// the other bound.
func checkAllocation(t testing.TB, what, path string, data []layout.Range, srcBlocks int64) {
	t.Helper()
	var dataBytes int64
	for _, d := range data {
		dataBytes += (d.End()+4095)&^4095 - d.Off&^4095
	}
	allowance := int64(64<<10) + int64(len(data))*256
	if got := blocks(t, path); got > max(dataBytes, srcBlocks)+allowance {
		t.Fatalf("%s: %s allocates %d bytes for %d bytes of data (%d extents; the source allocates %d)",
			what, path, got, dataBytes, len(data), srcBlocks)
	}
}

// blocks returns the bytes the file allocates (st_blocks).
func blocks(t testing.TB, path string) int64 {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		t.Fatal(err)
	}
	return st.Blocks * 512
}

// within reports whether r lies inside the union of the sorted ranges.
func within(rs []layout.Range, r layout.Range) bool {
	pos := r.Off
	for _, x := range rs {
		if x.End() <= pos {
			continue
		}
		if x.Off > pos {
			return false
		}
		pos = x.End()
		if pos >= r.End() {
			return true
		}
	}
	return pos >= r.End()
}

// sentinel is the modification time markUntouched gives a result: any
// write, punch or truncate afterwards replaces it with the current time,
// however coarse the filesystem's clock.
var sentinel = time.Date(2001, 2, 3, 4, 5, 6, 0, time.UTC)

func markUntouched(t testing.TB, path string) {
	t.Helper()
	if err := os.Chtimes(path, sentinel, sentinel); err != nil {
		t.Fatal(err)
	}
}

// touched reports whether anything modified the file since markUntouched.
func touched(t testing.TB, path string) bool {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return !fi.ModTime().Equal(sentinel)
}

// inode identifies the file at path (atomic syncs replace it).
func inode(t testing.TB, path string) uint64 {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		t.Fatal(err)
	}
	return st.Ino
}
