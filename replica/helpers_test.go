package replica

import (
	"context"
	"crypto/sha256"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// exportBytes exports the replica in dir and returns the image's bytes.
func exportBytes(t testing.TB, dir string) []byte {
	t.Helper()
	out := filepath.Join(t.TempDir(), "export.img")
	_, err := Export(context.Background(), dir, out, nil)
	require.NoError(t, err)
	b, err := os.ReadFile(out)
	require.NoError(t, err)
	return b
}

// fileNames lists dir.
func fileNames(t testing.TB, dir string) []string {
	ents, err := os.ReadDir(dir)
	require.NoError(t, err)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}

// exportSHA exports dir with Export and hashes the image.
func exportSHA(t *testing.T, dir string) [32]byte {
	t.Helper()
	return sha256.Sum256(exportBytes(t, dir))
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}
