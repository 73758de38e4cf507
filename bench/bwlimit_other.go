//go:build !linux

package bench

import (
	"context"
	"errors"
	"fmt"
)

// RunBwlimit needs Linux: it reads the kernel's per-process I/O counters.
func RunBwlimit(ctx context.Context, cfg BwlimitConfig) ([]BwlimitRow, error) {
	return nil, fmt.Errorf("bench: %w off Linux", errors.ErrUnsupported)
}
