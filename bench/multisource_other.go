//go:build !linux

package bench

import (
	"context"
	"errors"
	"fmt"
)

// RunMultiSource needs Linux (it starts servers as bench's other network
// scenario does).
func RunMultiSource(ctx context.Context, cfg MultiSourceConfig) ([]MultiSourceRow, error) {
	return nil, fmt.Errorf("bench: %w off Linux", errors.ErrUnsupported)
}
