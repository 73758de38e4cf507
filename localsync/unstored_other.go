//go:build !linux

package localsync

import (
	"context"
	"os"

	"github.com/sparsesync/sparsesync/sparse"
)

// unstoredZeros needs FIEMAP and cachestat(2): elsewhere nothing is found
// and every SEEK_DATA range is copied as data.
func unstoredZeros(_ context.Context, _ *os.File, data sparse.Map, _ []byte) sparse.Map {
	m, _ := sparse.NewMap(data.Size())
	return m
}
