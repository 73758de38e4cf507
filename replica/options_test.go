package replica

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestOptionsValidate: a counter mode that does not exist is refused
// with ErrInvalidOptions before anything is made on disk, by Create, Open
// and the volume calls alike; nil options are the defaults.
func TestOptionsValidate(t *testing.T) {
	bad := Options{Counter: CounterPerWrite + 1}
	require.ErrorIs(t, bad.Validate(), ErrInvalidOptions)
	require.NoError(t, (&Options{Counter: CounterPerWrite}).Validate())

	root := t.TempDir()
	dir := filepath.Join(root, "r")
	_, err := Create(dir, 1<<20, &bad)
	require.ErrorIs(t, err, ErrInvalidOptions)
	_, err = os.Stat(dir)
	require.ErrorIs(t, err, os.ErrNotExist, "nothing made for bad options")

	_, err = CreateVolume([]string{filepath.Join(root, "a")}, 1<<20, &VolumeOptions{Replica: bad})
	require.ErrorIs(t, err, ErrInvalidOptions)
	_, err = CreateVolume([]string{filepath.Join(root, "a")}, 1<<20, &VolumeOptions{Counter: 7})
	require.ErrorIs(t, err, ErrInvalidOptions)
	_, err = os.Stat(filepath.Join(root, "a", "volume.meta"))
	require.ErrorIs(t, err, os.ErrNotExist)

	r, err := Create(dir, 1<<20, nil)
	require.NoError(t, err)
	require.NoError(t, r.Close())
	_, err = Open(dir, &bad)
	require.ErrorIs(t, err, ErrInvalidOptions)
	_, err = OpenVolume([]string{dir}, &VolumeOptions{Counter: 7})
	require.ErrorIs(t, err, ErrInvalidOptions)

	r, err = Open(dir, nil)
	require.NoError(t, err)
	info, err := r.Info()
	require.NoError(t, err)
	require.Equal(t, CounterOn, info.CounterMode)
	require.NoError(t, r.Close())
}
