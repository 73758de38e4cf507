package disks

import (
	"errors"
	"fmt"
)

// Errors of configuring and starting an agent.
var (
	// ErrConfig marks a configuration the agent refuses before anything
	// moves: a disk path that is not a directory, two names for one path,
	// a disk that is not mounted, a duplicate or empty name, a threshold
	// out of range. The message names the disk and the cause.
	ErrConfig = errors.New("disks: bad configuration")
	// ErrOutOfRange marks the ErrConfig errors of a value out of its
	// range (a percentage over 100): a bad argument, not a bad disk.
	ErrOutOfRange = errors.New("disks: value out of range")
	// ErrAgentRunning: another agent (in this or another process) holds
	// one of the disks.
	ErrAgentRunning = errors.New("disks: another agent holds the disk")
	// ErrRecovery: an interrupted move cannot be completed or rolled back
	// without a decision the agent must not take alone (a directory
	// appeared where the move record says none can be, a move record
	// names a source disk that is not configured, or a retired source has
	// no record because the move's target disk is not configured). Nothing
	// was changed.
	ErrRecovery = errors.New("disks: cannot recover an interrupted move")
)

// Errors of one move (reported in move-failed and skip events).
var (
	// ErrBusy: the replica's directory lock is held (a writer has it open).
	ErrBusy = errors.New("disks: replica held open by a writer")
	// ErrMismatch: the copy does not describe the same replica as the source.
	ErrMismatch = errors.New("disks: copy differs from the source")
)

func configf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrConfig, fmt.Sprintf(format, args...))
}

// rangef is an ErrConfig error that also matches ErrOutOfRange, with the
// same message as configf.
func rangef(format string, args ...any) error {
	return fmt.Errorf("%w: %w", ErrConfig, outOfRange(fmt.Sprintf(format, args...)))
}

// outOfRange is the cause of a rangef error: its text, matching
// ErrOutOfRange.
type outOfRange string

func (e outOfRange) Error() string        { return string(e) }
func (e outOfRange) Is(target error) bool { return target == ErrOutOfRange }
