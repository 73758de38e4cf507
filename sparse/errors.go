package sparse

import (
	"errors"
	"strconv"
)

// Errors returned when a map from outside (decoded bytes, a caller's slice)
// breaks the extent-map invariants. Match them with errors.Is; the returned
// error also says which extent is at fault.
var (
	// ErrInvalidMap is the parent of every map validation error.
	ErrInvalidMap = errors.New("sparse: invalid extent map")
	// ErrOutOfOrder: extents are not sorted or overlap.
	ErrOutOfOrder = errors.New("sparse: extents out of order or overlapping")
	// ErrNotCoalesced: two extents touch and should have been merged.
	ErrNotCoalesced = errors.New("sparse: adjacent extents not merged")
	// ErrOutOfRange: an extent is empty, negative, overflows int64 or ends past the size.
	ErrOutOfRange = errors.New("sparse: extent out of range")
	// ErrTruncated: encoded map ends early.
	ErrTruncated = errors.New("sparse: encoded map truncated")
	// ErrMalformed: encoded map has a bad version, a non-minimal varint or trailing bytes.
	ErrMalformed = errors.New("sparse: encoded map malformed")
)

// ErrNotRegular is returned for files that are neither regular files nor
// block devices (pipes, sockets, character devices): they have no extents;
// and for pseudo-files of size 0 that read data (/proc, /sys).
var ErrNotRegular = errors.New("sparse: not a regular file or block device")

// mapError ties a specific validation failure to ErrInvalidMap so callers can
// match either the family or the exact cause.
type mapError struct {
	cause error
	index int
	msg   string
}

func (e *mapError) Error() string {
	if e.index >= 0 {
		return e.cause.Error() + ": extent " + strconv.Itoa(e.index) + ": " + e.msg
	}
	return e.cause.Error() + ": " + e.msg
}

func (e *mapError) Is(target error) bool { return target == ErrInvalidMap || target == e.cause }
func (e *mapError) Unwrap() error        { return e.cause }
