package longhorn

import (
	"errors"
	"fmt"
)

// Errors returned by the reader and the planners. Every error carries one of
// these sentinels (test with errors.Is) behind a message naming the object
// and the field.
var (
	// ErrBadState marks input that is not a valid Longhorn cluster state:
	// not JSON, an unsupported kind, a malformed or negative field, a
	// reference to a node, disk or volume that does not exist.
	ErrBadState = errors.New("longhorn: bad cluster state")

	// ErrInvalidOptions marks planner options that cannot be used.
	ErrInvalidOptions = errors.New("longhorn: invalid options")

	// ErrNoVolume is returned when a named volume does not exist.
	ErrNoVolume = errors.New("longhorn: no such volume")

	// ErrNotStable is returned by [RebalanceUntilStable] (inside a
	// [*NotStableError]) if the moves did not reach a fixed point within
	// its pass limit. Every move takes a replica to a disk it never left
	// and a disk-pressure move must free written bytes, so the passes end;
	// a low limit (or a huge cluster) can still cut them short.
	ErrNotStable = errors.New("longhorn: rebalancing did not reach a fixed point")
)

// stateError is an ErrBadState with its message.
type stateError struct{ msg string }

func (e *stateError) Error() string { return e.msg }
func (e *stateError) Unwrap() error { return ErrBadState }

func errorf(format string, args ...any) error {
	return &stateError{msg: fmt.Sprintf(format, args...)}
}
