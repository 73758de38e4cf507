package localsync

import (
	"fmt"
	"strings"
)

// Method is a way of moving bytes from the source to the destination. In
// Options it is the only method to use (MethodAuto: try them in order); in
// Stats it is the method that moved the data.
//
// Its String is the name used in --json output: reflink, copy_file_range,
// read_write, mixed; "none" for MethodAuto in Stats is left to the caller.
type Method uint8

//go:generate go run golang.org/x/tools/cmd/stringer@v0.52.0 -type=Method,ReflinkMode -linecomment

// Methods, cheapest first.
const (
	// MethodAuto (Options): reflink, then copy_file_range, then read/write.
	// In Stats it means that no data had to move.
	MethodAuto Method = iota // auto
	// MethodReflink shares blocks: FICLONE for a whole new file, FICLONERANGE
	// per block-aligned range otherwise (XFS, btrfs).
	MethodReflink // reflink
	// MethodCopyRange is copy_file_range with explicit offsets, one data
	// extent at a time (in-kernel copy; remaps on some filesystems).
	MethodCopyRange // copy_file_range
	// MethodReadWrite is pread/pwrite through pooled buffers, several
	// requests in flight.
	MethodReadWrite // read_write
	// MethodMixed (Stats only): more than one method moved data.
	MethodMixed // mixed
)

// ParseMethod parses auto, reflink, copy-range (or copy_file_range) and
// read-write (or read_write).
func ParseMethod(s string) (Method, error) {
	switch strings.ReplaceAll(s, "_", "-") {
	case "auto":
		return MethodAuto, nil
	case "reflink":
		return MethodReflink, nil
	case "copy-range", "copy-file-range":
		return MethodCopyRange, nil
	case "read-write":
		return MethodReadWrite, nil
	}
	return 0, fmt.Errorf("%w: unknown method %q (want auto, reflink, copy-range or read-write)", ErrInvalidOptions, s)
}

// ReflinkMode says whether the copy may, must or must not share blocks.
type ReflinkMode uint8

// Reflink modes, as cp --reflink.
const (
	// ReflinkAuto clones where the filesystem can and copies elsewhere.
	ReflinkAuto ReflinkMode = iota // auto
	// ReflinkAlways fails with ErrReflinkUnsupported, before writing, when
	// the files cannot share blocks; every data byte is cloned.
	ReflinkAlways // always
	// ReflinkNever never shares blocks: no FICLONE, and no copy_file_range
	// either (it remaps blocks on XFS and btrfs) unless Method is
	// MethodCopyRange.
	ReflinkNever // never
)

// ParseReflink parses auto, always and never.
func ParseReflink(s string) (ReflinkMode, error) {
	switch s {
	case "auto":
		return ReflinkAuto, nil
	case "always":
		return ReflinkAlways, nil
	case "never":
		return ReflinkNever, nil
	}
	return 0, fmt.Errorf("%w: unknown reflink mode %q (want auto, always or never)", ErrInvalidOptions, s)
}
