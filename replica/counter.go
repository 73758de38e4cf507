package replica

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// CounterMode says whether and how a replica counts its writes.
type CounterMode uint8

const (
	// CounterOn (the zero value) counts every completed write and unmap in
	// a shared memory-mapped page (no syscall per write) and persists the
	// count with the data on every Flush and on Close.
	CounterOn CounterMode = iota
	// CounterOff keeps no revision counter (Longhorn's --disableRevCounter).
	CounterOff
	// CounterPerWrite imitates Longhorn: after every write it rewrites
	// revision.counter with an O_DIRECT pwrite, serialized. For comparison.
	CounterPerWrite
)

// Enabled reports whether the mode keeps a counter.
func (m CounterMode) Enabled() bool { return m != CounterOff }

func (m CounterMode) String() string {
	switch m {
	case CounterOff:
		return "off"
	case CounterOn:
		return "on"
	case CounterPerWrite:
		return "per-write"
	}
	return "CounterMode(" + strconv.Itoa(int(m)) + ")"
}

// ParseCounterMode parses "off", "on" or "per-write".
func ParseCounterMode(s string) (CounterMode, error) {
	for _, m := range []CounterMode{CounterOn, CounterOff, CounterPerWrite} {
		if s == m.String() {
			return m, nil
		}
	}
	return 0, fmt.Errorf("unknown revision counter mode %q (want off, on or per-write)", s)
}

// counterFileSize is the size of revision.counter: one 4 KiB block.
const counterFileSize = 4096

// FormatRevisionCounter renders n as Longhorn's revision.counter: ASCII
// decimal at offset 0, NUL padded to 4096 bytes.
func FormatRevisionCounter(n int64) []byte {
	b := make([]byte, counterFileSize)
	formatRevisionCounter(b, n)
	return b
}

func formatRevisionCounter(b []byte, n int64) {
	clear(b)
	strconv.AppendInt(b[:0], n, 10)
}

// ParseRevisionCounter parses the content of a revision.counter file: ASCII
// decimal digits followed only by NULs, at most 4096 bytes. An empty file,
// other bytes, a negative number or an overflow are errors (Longhorn cannot
// open such a replica either).
func ParseRevisionCounter(b []byte) (int64, error) {
	if len(b) > counterFileSize {
		return 0, fmt.Errorf("%d bytes, want at most %d", len(b), counterFileSize)
	}
	s := strings.TrimRight(string(b), "\x00")
	if s == "" {
		return 0, fmt.Errorf("empty counter")
	}
	for _, c := range []byte(s) {
		if c < '0' || c > '9' {
			return 0, fmt.Errorf("not a decimal counter: %q", truncate(s, 32))
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("counter %q: %w", truncate(s, 32), err)
	}
	return n, nil
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}

// readRevisionCounter reads and parses dir/revision.counter.
func readRevisionCounter(path string) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, counterFileSize+1))
	if err != nil {
		return 0, err
	}
	n, err := ParseRevisionCounter(b)
	if err != nil {
		return 0, corruptf(path, "%v", err)
	}
	return n, nil
}

// ID is a 16-byte identifier (volume, replica, boot).
type ID [16]byte

func (id ID) String() string { return hex.EncodeToString(id[:]) }

func newID() ID {
	var id ID
	_, _ = rand.Read(id[:]) // crypto/rand.Read never fails
	return id
}

// ParseBootID parses a UUID such as /proc/sys/kernel/random/boot_id.
func ParseBootID(s string) (ID, error) {
	var id ID
	h := strings.ReplaceAll(strings.TrimSpace(s), "-", "")
	if len(h) != 32 {
		return id, fmt.Errorf("boot id %q is not a UUID", s)
	}
	if _, err := hex.Decode(id[:], []byte(h)); err != nil {
		return id, fmt.Errorf("boot id %q: %w", s, err)
	}
	return id, nil
}

// currentBootID reads the kernel's boot id, which changes on every boot:
// a live counter written under another boot id may have been lost with the
// page cache.
func currentBootID() (ID, error) {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return ID{}, err
	}
	return ParseBootID(string(b))
}

// header is one slot of replica.hdr: what Longhorn's format cannot say.
//
// The file holds two slots (A at 0, B at headerSlotSize). An update writes
// the slot not holding the current state and fdatasyncs it; a reader takes
// the valid slot (magic, version, crc32c) with the highest (epoch, flushSeq,
// gen). A torn write destroys at most the slot being written.
type header struct {
	gen       uint64 // bumped on every header write; picks the newer slot
	mode      CounterMode
	clean     bool // written by Close: no write after writeSeq
	epoch     uint64
	flushSeq  uint64
	writeSeq  uint64 // completed writes counted at the last flush/close
	volumeID  ID
	replicaID ID
	bootID    ID // boot of the process that wrote this slot

	// Version 2 on. version is the slot's format as read (encode always
	// writes headerVersion).
	version uint16
	// head identifies the head image when the slot was written: the
	// replica incarnation the header belongs to (see leftoverReason).
	head fileIdent
	// rcSeq is the count last written into revision.counter before this
	// slot was written: a higher revision.counter was written by another
	// writer (Longhorn).
	rcSeq uint64
}

// fileIdent identifies one file for as long as it exists: its inode number
// and birth time (0 where the filesystem keeps none). A hard link (how
// Longhorn and we turn the head into a snapshot) keeps it; a file created
// anew after a delete gets another birth time even where the inode number
// is reused.
type fileIdent struct {
	ino   uint64
	btime int64
}

const (
	headerMagic = "SPSYNCRH"
	// headerVersion 2 added head and rcSeq; version 1 slots (sparsesync
	// before issue 24) still decode, with both zero.
	headerVersion  = 2
	headerSlotSize = 4096                             // one O_DIRECT block per slot
	headerLen      = 8 + 2 + 1 + 1 + 8*4 + 16*3 + 8*3 // 116
	headerFileSize = 2 * headerSlotSize
)

var crc32c = crc32.MakeTable(crc32.Castagnoli)

// encode writes the slot into b (headerSlotSize bytes).
func (h *header) encode(b []byte) {
	clear(b[:headerSlotSize])
	copy(b, headerMagic)
	le := binary.LittleEndian
	le.PutUint16(b[8:], headerVersion)
	b[10] = byte(h.mode)
	if h.clean {
		b[11] = 1
	}
	le.PutUint64(b[12:], h.gen)
	le.PutUint64(b[20:], h.epoch)
	le.PutUint64(b[28:], h.flushSeq)
	le.PutUint64(b[36:], h.writeSeq)
	copy(b[44:60], h.volumeID[:])
	copy(b[60:76], h.replicaID[:])
	copy(b[76:92], h.bootID[:])
	le.PutUint64(b[92:], h.head.ino)
	le.PutUint64(b[100:], uint64(h.head.btime))
	le.PutUint64(b[108:], h.rcSeq)
	le.PutUint32(b[headerSlotSize-4:], crc32.Checksum(b[:headerSlotSize-4], crc32c))
}

// decodeHeaderSlot decodes one slot; it rejects anything that is not a slot
// this version wrote intact.
func decodeHeaderSlot(b []byte) (header, error) {
	var h header
	if len(b) < headerSlotSize {
		return h, fmt.Errorf("slot truncated (%d bytes)", len(b))
	}
	b = b[:headerSlotSize]
	le := binary.LittleEndian
	if string(b[:8]) != headerMagic {
		return h, fmt.Errorf("bad magic")
	}
	if got, want := le.Uint32(b[headerSlotSize-4:]), crc32.Checksum(b[:headerSlotSize-4], crc32c); got != want {
		return h, fmt.Errorf("checksum mismatch")
	}
	h.version = le.Uint16(b[8:])
	if h.version != 1 && h.version != headerVersion {
		return h, fmt.Errorf("version %d, want 1 or %d", h.version, headerVersion)
	}
	h.mode = CounterMode(b[10])
	if h.mode > CounterPerWrite || b[11] > 1 {
		return h, fmt.Errorf("bad mode byte %d/%d", b[10], b[11])
	}
	h.clean = b[11] == 1
	h.gen = le.Uint64(b[12:])
	h.epoch = le.Uint64(b[20:])
	h.flushSeq = le.Uint64(b[28:])
	h.writeSeq = le.Uint64(b[36:])
	copy(h.volumeID[:], b[44:60])
	copy(h.replicaID[:], b[60:76])
	copy(h.bootID[:], b[76:92])
	if h.version >= 2 {
		h.head = fileIdent{ino: le.Uint64(b[92:]), btime: int64(le.Uint64(b[100:]))}
		h.rcSeq = le.Uint64(b[108:])
	}
	if h.writeSeq > 1<<62 || h.rcSeq > 1<<62 {
		return h, fmt.Errorf("write count %d out of range", h.writeSeq)
	}
	return h, nil
}

// decodeHeader picks the newest valid slot of a replica.hdr content.
// slot is 0 or 1, the slot the header came from.
func decodeHeader(b []byte) (h header, slot int, err error) {
	if len(b) != headerFileSize {
		return h, 0, fmt.Errorf("%d bytes, want %d", len(b), headerFileSize)
	}
	a, errA := decodeHeaderSlot(b[:headerSlotSize])
	c, errB := decodeHeaderSlot(b[headerSlotSize:])
	switch {
	case errA != nil && errB != nil:
		return h, 0, fmt.Errorf("no valid slot (A: %v; B: %v)", errA, errB)
	case errB != nil:
		return a, 0, nil
	case errA != nil:
		return c, 1, nil
	case c.gen > a.gen:
		return c, 1, nil
	}
	return a, 0, nil
}

// readHeader reads dir/replica.hdr; (false, nil) when the file does not exist.
func readHeader(path string) (header, bool, error) {
	h, _, ok, err := readHeaderSlot(path)
	return h, ok, err
}

// readHeaderSlot is readHeader that also says which slot is current.
func readHeaderSlot(path string) (h header, slot int, ok bool, err error) {
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return header{}, 0, false, nil
	}
	if err != nil {
		return header{}, 0, false, err
	}
	h, slot, err = decodeHeader(b)
	if err != nil {
		return h, 0, true, corruptf(path, "%v", err)
	}
	return h, slot, true, nil
}

// headerFile is an open replica.hdr.
type headerFile struct {
	f     *os.File
	dsync bool // opened O_DIRECT|O_DSYNC: a completed pwrite is durable
	slot  int  // slot holding cur
	cur   header
	buf   []byte // aligned, headerSlotSize
}

// write stores h in the other slot, durably (an O_DIRECT|O_DSYNC write, a
// FUA write on most devices, or pwrite+fdatasync); on success it is current.
func (hf *headerFile) write(h header) error {
	h.gen = hf.cur.gen + 1
	h.encode(hf.buf)
	slot := 1 - hf.slot
	if _, err := hf.f.WriteAt(hf.buf, int64(slot*headerSlotSize)); err != nil {
		return err
	}
	if !hf.dsync {
		if err := fdatasync(hf.f); err != nil {
			return err
		}
	}
	hf.cur, hf.slot = h, slot
	return nil
}

// live.counter: one MAP_SHARED page holding the count of completed writes.
// It lives in the page cache, so it survives a kill of the process (F1) at
// the cost of one atomic add per write; after a reboot (other boot id) it is
// ignored in favour of the count persisted at the last flush.
const (
	liveMagic    = "SPSYNCLC"
	liveFileSize = 4096
	liveCountOff = 64 // own cache line
	// liveRCOff holds the count last written into revision.counter (in a
	// line of its own: it changes once per flush, the count per write).
	liveRCOff = 128
)

// liveCounter is a mapped live.counter.
type liveCounter struct {
	f   *os.File
	mem []byte
	n   *atomic.Uint64
	rc  *atomic.Uint64 // last count written into revision.counter
}

// liveState is a decoded live.counter.
type liveState struct {
	replicaID ID
	bootID    ID
	count     uint64
	rcLast    uint64 // 0 in pages of sparsesync before issue 24
}

func decodeLive(b []byte) (liveState, error) {
	var s liveState
	if len(b) != liveFileSize {
		return s, fmt.Errorf("%d bytes, want %d", len(b), liveFileSize)
	}
	if string(b[:8]) != liveMagic {
		return s, fmt.Errorf("bad magic")
	}
	copy(s.replicaID[:], b[16:32])
	copy(s.bootID[:], b[32:48])
	s.count = binary.LittleEndian.Uint64(b[liveCountOff:])
	s.rcLast = binary.LittleEndian.Uint64(b[liveRCOff:])
	return s, nil
}

func readLive(path string) (liveState, bool, error) {
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return liveState{}, false, nil
	}
	if err != nil {
		return liveState{}, false, err
	}
	s, err := decodeLive(b)
	if err != nil {
		return s, true, corruptf(path, "%v", err)
	}
	return s, true, nil
}

// openLive creates or rewrites path as a live counter page for this boot
// starting at count, with rcLast the count last written into
// revision.counter, and maps it.
func openLive(path string, replicaID, bootID ID, count, rcLast uint64) (*liveCounter, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	page := make([]byte, liveFileSize)
	copy(page, liveMagic)
	copy(page[16:32], replicaID[:])
	copy(page[32:48], bootID[:])
	binary.LittleEndian.PutUint64(page[liveCountOff:], count)
	binary.LittleEndian.PutUint64(page[liveRCOff:], rcLast)
	if _, err := f.WriteAt(page, 0); err != nil {
		f.Close()
		return nil, err
	}
	if err := f.Truncate(liveFileSize); err != nil {
		f.Close()
		return nil, err
	}
	mem, err := unix.Mmap(int(f.Fd()), 0, liveFileSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		f.Close()
		return nil, &os.PathError{Op: "mmap", Path: path, Err: err}
	}
	if !bytes.Equal(mem[:8], []byte(liveMagic)) {
		unix.Munmap(mem)
		f.Close()
		return nil, corruptf(path, "mapped page does not hold what was written")
	}
	return &liveCounter{f: f, mem: mem, n: (*atomic.Uint64)(unsafe.Pointer(&mem[liveCountOff])),
		rc: (*atomic.Uint64)(unsafe.Pointer(&mem[liveRCOff]))}, nil
}

func (l *liveCounter) close() error {
	err := unix.Munmap(l.mem)
	if cerr := l.f.Close(); err == nil {
		err = cerr
	}
	return err
}
