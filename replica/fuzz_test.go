package replica

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"strconv"
	"testing"
)

// FuzzParseRevisionCounter: the parser accepts exactly the canonical
// decimal form followed by NULs, and what it accepts round-trips.
func FuzzParseRevisionCounter(f *testing.F) {
	for _, s := range []string{"0", "12\x00\x00", "", "-1", "9223372036854775807", "9223372036854775808", "1\x002", " 1"} {
		f.Add([]byte(s))
	}
	f.Add(FormatRevisionCounter(64000))
	f.Fuzz(func(t *testing.T, b []byte) {
		n, err := ParseRevisionCounter(b)
		if err != nil {
			return
		}
		if n < 0 || len(b) > counterFileSize {
			t.Fatalf("accepted %q as %d", b, n)
		}
		s := strconv.FormatInt(n, 10)
		trimmed := bytes.TrimRight(b, "\x00")
		// Leading zeros are accepted ("007"), so compare numerically.
		if m, _ := strconv.ParseInt(string(trimmed), 10, 64); m != n || len(trimmed) < len(s) {
			t.Fatalf("%q parsed as %d", b, n)
		}
		if got, err := ParseRevisionCounter(FormatRevisionCounter(n)); err != nil || got != n {
			t.Fatalf("round trip of %d: %d, %v", n, got, err)
		}
	})
}

// FuzzDecodeHeader: any bytes decode without panicking, and an accepted
// header re-encodes into a slot that decodes to the same header.
func FuzzDecodeHeader(f *testing.F) {
	h := header{mode: CounterOn, epoch: 3, flushSeq: 9, writeSeq: 100, gen: 2, volumeID: ID{1}, replicaID: ID{2}, bootID: ID{3}}
	b := make([]byte, headerFileSize)
	h.encode(b[:headerSlotSize])
	f.Add(bytes.Clone(b))
	h.gen = 3
	h.encode(b[headerSlotSize:])
	f.Add(bytes.Clone(b))
	f.Add(make([]byte, headerFileSize))
	f.Add([]byte("SPSYNCRH"))
	// A version-1 slot (sparsesync before issue 24): no head identity,
	// no revision.counter count.
	v1 := make([]byte, headerFileSize)
	h.encode(v1)
	binary.LittleEndian.PutUint16(v1[8:], 1)
	clear(v1[92:116])
	binary.LittleEndian.PutUint32(v1[headerSlotSize-4:], crc32.Checksum(v1[:headerSlotSize-4], crc32c))
	f.Add(v1)
	f.Fuzz(func(t *testing.T, b []byte) {
		got, _, err := decodeHeader(b)
		if err != nil {
			return
		}
		if got.version == 1 && (got.head != fileIdent{} || got.rcSeq != 0) {
			t.Fatalf("version-1 slot decoded with version-2 fields: %+v", got)
		}
		slot := make([]byte, headerSlotSize)
		got.encode(slot)
		again, err := decodeHeaderSlot(slot)
		got.version = headerVersion // encode writes the current version
		if err != nil || again != got {
			t.Fatalf("re-encoded header %+v decodes to %+v, %v", got, again, err)
		}
	})
}

// FuzzDecodeLive: the live page decoder never panics and checks its size.
func FuzzDecodeLive(f *testing.F) {
	page := make([]byte, liveFileSize)
	copy(page, liveMagic)
	f.Add(page)
	f.Add([]byte(liveMagic))
	f.Fuzz(func(t *testing.T, b []byte) {
		if _, err := decodeLive(b); err == nil && len(b) != liveFileSize {
			t.Fatalf("accepted %d bytes", len(b))
		}
	})
}
