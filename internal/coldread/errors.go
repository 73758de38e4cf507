package coldread

import "errors"

// ErrOtherFile is returned by OpenDirect when the descriptor it opened is
// not the given file's inode.
var ErrOtherFile = errors.New("coldread: direct descriptor names another file")
