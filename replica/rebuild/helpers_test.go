package rebuild

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sparsesync/sparsesync/replica"
)

// Copies of small helpers of package replica's tests, which this
// package's tests (moved from there) use and cannot import.

// headIndex parses volume-head-NNN.img.
func headIndex(img string) (int, bool) {
	s, ok := strings.CutPrefix(img, "volume-head-")
	if !ok {
		return 0, false
	}
	s, ok = strings.CutSuffix(s, ".img")
	if !ok || len(s) != 3 {
		return 0, false
	}
	n, err := strconv.Atoi(s)
	return n, err == nil
}

func replicaRoundDown(x int64) int64 { return x &^ (replica.BlockSize - 1) }
func replicaRoundUp(x int64) int64   { return (x + replica.BlockSize - 1) &^ (replica.BlockSize - 1) }

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

func writeLonghornDir(t *testing.T, dir string, counter int64, headData, snapData map[int64]byte) {
	t.Helper()
	require.NoError(t, os.MkdirAll(dir, 0o700))
	const size = 1 << 20
	write := func(name, s string) { require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(s), 0o600)) }
	img := func(name string, data map[int64]byte) {
		f, err := os.Create(filepath.Join(dir, name))
		require.NoError(t, err)
		require.NoError(t, f.Truncate(size))
		for off, c := range data {
			_, err := f.WriteAt(bytes.Repeat([]byte{c}, replica.BlockSize), off)
			require.NoError(t, err)
		}
		require.NoError(t, f.Close())
	}
	write("volume.meta", `{"Size":1048576,"Head":"volume-head-002.img","Dirty":true,"Rebuilding":false,"Error":"","Parent":"volume-snap-c8e2b5ce-3a5a-4c5f-a3f0-5c2f1b9d7e61.img","SectorSize":512,"BackingFilePath":""}`)
	img("volume-head-002.img", headData)
	write("volume-head-002.img.meta", `{"Name":"volume-head-002.img","Parent":"volume-snap-c8e2b5ce-3a5a-4c5f-a3f0-5c2f1b9d7e61.img","Removed":false,"UserCreated":false,"Created":"2024-05-02T10:11:12Z","Labels":null}`)
	img("volume-snap-c8e2b5ce-3a5a-4c5f-a3f0-5c2f1b9d7e61.img", snapData)
	write("volume-snap-c8e2b5ce-3a5a-4c5f-a3f0-5c2f1b9d7e61.img.meta", `{"Name":"volume-snap-c8e2b5ce-3a5a-4c5f-a3f0-5c2f1b9d7e61.img","Parent":"","Removed":false,"UserCreated":true,"Created":"2024-05-01T09:00:00Z","Labels":{"app":"db"}}`)
	if counter >= 0 {
		write("revision.counter", string(replica.FormatRevisionCounter(counter)))
	}
}

// exportSHA exports dir with replica.Export and hashes the image.
func exportSHA(t *testing.T, dir string) [32]byte {
	t.Helper()
	return sha256.Sum256(exportBytes(t, dir))
}
