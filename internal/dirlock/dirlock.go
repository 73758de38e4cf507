//go:build unix

// Package dirlock takes the exclusive directory lock that marks a replica
// directory (or a disk) as in use: a non-blocking flock(2) on the directory
// itself, held for as long as the returned file is open and released by the
// kernel when its process dies. replica's writers and rebuilds and the disk
// agent all take it, so each keeps the others out.
package dirlock

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

	"golang.org/x/sys/unix"

	"github.com/sparsesync/sparsesync/internal/rawfd"
)

// ErrLocked is returned when another open file description holds the lock.
var ErrLocked = errors.New("dirlock: directory is locked")

// Lock takes an exclusive, non-blocking flock on dir. Closing the returned
// file releases it. A held lock fails with an error matching ErrLocked; a
// missing directory with one matching fs.ErrNotExist.
func Lock(dir string) (*os.File, error) {
	d, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	errno := rawfd.Do(d, func(fd int) error {
		return rawfd.Retry(func() error { return unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB) })
	})
	if errno != nil {
		d.Close()
		if errors.Is(errno, unix.EWOULDBLOCK) {
			return nil, fmt.Errorf("%s: %w", dir, ErrLocked)
		}
		return nil, &fs.PathError{Op: "flock", Path: dir, Err: errno}
	}
	return d, nil
}
