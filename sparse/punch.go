package sparse

import (
	"fmt"
	"io/fs"
	"os"
)

// WriteZeros writes n zero bytes at off with pwrite, for targets that cannot
// punch holes.
func WriteZeros(f *os.File, off, n int64) error {
	for n > 0 {
		c := min(n, int64(len(zeroes)))
		w, err := f.WriteAt(zeroes[:c], off)
		if err != nil {
			return &fs.PathError{Op: "write_zeros", Path: f.Name(), Err: fmt.Errorf("at %d: %w", off, err)}
		}
		off += int64(w)
		n -= int64(w)
	}
	return nil
}
