package disks

import (
	"errors"
	"fmt"
	"os"

	"github.com/sparsesync/sparsesync/internal/dirlock"
)

// flockDir takes the directory lock replica.Open and rebuild.Rebuild take
// on a replica directory (internal/dirlock), so holding it keeps every
// writer out (their Open fails with replica.ErrBusy), and a writer holding
// it makes flockDir fail with ErrBusy. Closing the returned file releases
// it; so does the death of the process.
func flockDir(dir string) (*os.File, error) {
	d, err := dirlock.Lock(dir)
	if errors.Is(err, dirlock.ErrLocked) {
		return nil, fmt.Errorf("%s: %w", dir, ErrBusy)
	}
	return d, err
}
