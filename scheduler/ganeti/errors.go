package ganeti

import (
	"errors"
	"fmt"
)

// Sentinel errors, grouped by operation.
var (
	// ErrSyntax marks input that does not follow the text or JSON format.
	ErrSyntax = errors.New("ganeti: syntax error")
	// ErrReference marks input that names an unknown group, node or owner.
	ErrReference = errors.New("ganeti: unknown reference")
	// ErrInvalid marks input whose values are inconsistent (for example a
	// DRBD instance whose primary and secondary node are the same).
	ErrInvalid = errors.New("ganeti: invalid cluster")
	// ErrOptions marks planner options that cannot be used.
	ErrOptions = errors.New("ganeti: invalid options")
)

// ParseError describes a problem in cluster input: the file (the name given
// to the reader), the 1-based line (0 when unknown, e.g. in JSON), the field
// and the cause, which wraps one of the sentinels above.
type ParseError struct {
	File  string
	Line  int
	Field string
	Err   error
}

func (e *ParseError) Error() string {
	switch {
	case e.Line > 0 && e.Field != "":
		return fmt.Sprintf("%s:%d: %s: %v", e.File, e.Line, e.Field, e.Err)
	case e.Line > 0:
		return fmt.Sprintf("%s:%d: %v", e.File, e.Line, e.Err)
	case e.Field != "":
		return fmt.Sprintf("%s: %s: %v", e.File, e.Field, e.Err)
	default:
		return fmt.Sprintf("%s: %v", e.File, e.Err)
	}
}

func (e *ParseError) Unwrap() error { return e.Err }
