//go:build !linux

package sparse

import (
	"context"
	"errors"
	"io/fs"
	"os"
)

// Fiemap is Linux-only; elsewhere it returns an error matching errors.ErrUnsupported.
func Fiemap(_ context.Context, f *os.File, _, _ int64, _ func(FiemapExtent) error) error {
	return &fs.PathError{Op: "fiemap", Path: f.Name(), Err: errors.ErrUnsupported}
}
