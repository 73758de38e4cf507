package sparse

import (
	"strings"
)

// FiemapFlags are the per-extent flags FIEMAP reports (linux/fiemap.h).
type FiemapFlags uint32

// FIEMAP extent flags.
const (
	FiemapLast          FiemapFlags = 0x0001 // last extent in the file
	FiemapUnknown       FiemapFlags = 0x0002 // location not known yet
	FiemapDelalloc      FiemapFlags = 0x0004 // delayed allocation (implies Unknown)
	FiemapEncoded       FiemapFlags = 0x0008 // data is compressed or otherwise encoded
	FiemapDataEncrypted FiemapFlags = 0x0080 // data is encrypted
	FiemapNotAligned    FiemapFlags = 0x0100 // not block-aligned
	FiemapDataInline    FiemapFlags = 0x0200 // data inline in metadata
	FiemapDataTail      FiemapFlags = 0x0400 // several files packed in one block
	FiemapUnwritten     FiemapFlags = 0x0800 // allocated but unwritten: reads as zeros
	FiemapMerged        FiemapFlags = 0x1000 // merged from several on-disk extents
	FiemapShared        FiemapFlags = 0x2000 // blocks shared with another file (reflink, snapshot)
)

var fiemapFlagNames = []struct {
	f    FiemapFlags
	name string
}{
	{FiemapLast, "last"}, {FiemapUnknown, "unknown"}, {FiemapDelalloc, "delalloc"},
	{FiemapEncoded, "encoded"}, {FiemapDataEncrypted, "encrypted"}, {FiemapNotAligned, "not_aligned"},
	{FiemapDataInline, "inline"}, {FiemapDataTail, "tail"}, {FiemapUnwritten, "unwritten"},
	{FiemapMerged, "merged"}, {FiemapShared, "shared"},
}

// String lists the set flags, comma-separated.
func (f FiemapFlags) String() string {
	var names []string
	for _, n := range fiemapFlagNames {
		if f&n.f != 0 {
			names = append(names, n.name)
		}
	}
	return strings.Join(names, ",")
}

// FiemapExtent is one record of a file's physical layout.
type FiemapExtent struct {
	Logical  int64 // offset in the file
	Physical int64 // offset on the device (0 when Unknown)
	Length   int64
	Flags    FiemapFlags
}

// Extent returns the logical range of the record.
func (e FiemapExtent) Extent() Extent { return Extent{e.Logical, e.Length} }
