package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sparsesync/sparsesync/replica"
	"github.com/sparsesync/sparsesync/scheduler/disks"
	"github.com/sparsesync/sparsesync/sparse"
)

// TestErrorLinePathsUntouched: a path that ends in a package's name
// ("/mnt/d1/disks", "replica: x" as a file name) keeps it in the line;
// only a sentinel's own package name is left out.
func TestErrorLinePathsUntouched(t *testing.T) {
	err := disksErr(&os.PathError{Op: "open", Path: "/mnt/d1/disks", Err: errors.New("x")})
	require.Equal(t, "sparsesync: disks: open /mnt/d1/disks: x", errorLine(err))
	err = fmt.Errorf("replica check: %w", &os.PathError{Op: "stat", Path: "/srv/replica", Err: os.ErrNotExist})
	require.Equal(t, "sparsesync: replica check: stat /srv/replica: file does not exist", errorLine(err))
	err = fmt.Errorf("local replica: sparse: x -> y: %w", sparse.ErrNotRegular)
	require.Equal(t, "sparsesync: local replica: sparse: x -> y: not a regular file or block device", errorLine(err))
	// Sentinels joined, one of them twice: each loses its name.
	err = fmt.Errorf("replica rebuild: %w", errors.Join(replica.ErrBusy, fmt.Errorf("disk d1: %w", disks.ErrBusy)))
	require.Equal(t, "sparsesync: replica rebuild: directory is open by another writer disk d1: replica held open by a writer", errorLine(err))
}

// TestBareSentinelNamesCommand: a library sentinel returned as is (no
// wrapping by the command) is still a line that names the command.
func TestBareSentinelNamesCommand(t *testing.T) {
	var stderr, stdout bytes.Buffer
	g := &globalOpts{stdout: &stdout, stderr: &stderr}
	root := newRootCommand(g)
	cmd, _, err := root.Find([]string{"replica", "rebuild"})
	require.NoError(t, err)
	code := report(t.Context(), g, cmd, false, fmt.Errorf("%w: /srv/r1", replica.ErrBusy))
	require.Equal(t, 1, code)
	require.Equal(t, "sparsesync: replica rebuild: directory is open by another writer: /srv/r1\n", stderr.String())
}
