package rebuild

import (
	"crypto/sha256"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// Copies of small helpers of package replica's tests, which this
// package's tests (moved from there) use and cannot import.

// writeJSONAtomic writes v as JSON into dir/name (tests edit metadata).
func writeJSONAtomic(dir, name string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	tmp := filepath.Join(dir, name+".tmp")
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(dir, name))
}

// exportSHA exports dir with replica.Export and hashes the image.
func exportSHA(t *testing.T, dir string) [32]byte {
	t.Helper()
	return sha256.Sum256(exportBytes(t, dir))
}
