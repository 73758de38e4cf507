//go:build !linux

package bench

import (
	"context"
	"errors"
	"fmt"
)

// Run needs Linux: it drops caches, reads block device counters and syncs
// filesystems with syncfs.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	return nil, fmt.Errorf("bench: %w off Linux", errors.ErrUnsupported)
}

// LoopFS is a scratch loop filesystem (Linux only).
type LoopFS struct {
	Kind, Dir string
	DirectIO  bool
}

// MountLoop needs Linux.
func MountLoop(ctx context.Context, kind string, size int64, parent string) (*LoopFS, error) {
	return nil, fmt.Errorf("bench: loop filesystems: %w off Linux", errors.ErrUnsupported)
}

// Close does nothing off Linux.
func (l *LoopFS) Close() error { return nil }
