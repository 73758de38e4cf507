package disks_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sparsesync/sparsesync/internal/testutil/loopfs"
	"github.com/sparsesync/sparsesync/replica"
	"github.com/sparsesync/sparsesync/scheduler/disks"
)

const mib = 1 << 20

// mount makes a loop filesystem; XFS needs at least 300 MiB.
func mount(t *testing.T, kind loopfs.Kind) string {
	t.Helper()
	size := int64(256 * mib)
	if kind == loopfs.XFS {
		size = 320 * mib
	}
	return loopfs.Mount(t, kind, size)
}

// subdir makes a disk directory inside a mounted filesystem.
func subdir(t *testing.T, mnt, name string) string {
	t.Helper()
	d := filepath.Join(mnt, name)
	require.NoError(t, os.Mkdir(d, 0o755))
	return d
}

// writeReplica creates a replica of size bytes in dir through package
// replica: data bytes of random content in 1 MiB pieces spread over the
// volume (holes between), a snapshot after the first half. It returns the
// SHA-256 of the exported volume.
func writeReplica(t *testing.T, dir string, size, data int64, seed uint64) string {
	t.Helper()
	r, err := replica.Create(dir, size, nil)
	require.NoError(t, err)
	rng := rand.New(rand.NewChaCha8([32]byte{byte(seed), byte(seed >> 8), 7}))
	buf := make([]byte, mib)
	pieces := data / mib
	stride := size / pieces
	for i := range pieces {
		for j := range buf {
			buf[j] = byte(rng.Uint32())
		}
		_, err := r.WriteAt(buf, i*stride)
		require.NoError(t, err)
		if i == pieces/2 {
			require.NoError(t, r.Snapshot("half", nil))
		}
	}
	require.NoError(t, r.Close())
	return exportSum(t, dir)
}

// exportSum exports the replica in dir and returns the image's SHA-256.
func exportSum(t *testing.T, dir string) string {
	t.Helper()
	img := filepath.Join(t.TempDir(), "export.img")
	_, err := replica.Export(t.Context(), dir, img, nil)
	require.NoError(t, err)
	f, err := os.Open(img)
	require.NoError(t, err)
	defer f.Close()
	h := sha256.New()
	_, err = io.Copy(h, f)
	require.NoError(t, err)
	require.NoError(t, os.Remove(img))
	return hex.EncodeToString(h.Sum(nil))
}

// where returns, for each replica name, the disks (by name) holding a
// directory of that name.
func where(t *testing.T, cfg disks.Config) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for _, d := range cfg.Disks {
		ents, err := os.ReadDir(d.Path)
		require.NoError(t, err)
		for _, e := range ents {
			if e.IsDir() && e.Name() != "lost+found" && e.Name() != disks.AgentDir {
				out[e.Name()] = append(out[e.Name()], d.Name)
			}
		}
	}
	return out
}

// checkClean asserts that every disk holds exactly the replica
// directories of want (name → one disk), nothing else (an empty agent
// directory, no staging copy), and every replica exports to its sum.
func checkClean(t *testing.T, cfg disks.Config, sums map[string]string) map[string]string {
	t.Helper()
	loc := map[string]string{}
	for name, ds := range where(t, cfg) {
		require.Len(t, ds, 1, "replica %s is on %v", name, ds)
		loc[name] = ds[0]
	}
	for _, d := range cfg.Disks {
		ents, err := os.ReadDir(d.Path)
		require.NoError(t, err)
		for _, e := range ents {
			if e.Name() == disks.AgentDir {
				// The agent keeps it on every disk; empty between moves.
				left, err := os.ReadDir(filepath.Join(d.Path, e.Name()))
				require.NoError(t, err)
				require.Empty(t, left, "disk %s: left behind in %s", d.Name, disks.AgentDir)
				continue
			}
			_, isReplica := sums[e.Name()]
			require.True(t, isReplica || e.Name() == "lost+found" || e.Name() == "filler",
				"disk %s: left behind: %s", d.Name, e.Name())
		}
	}
	var names []string
	for name := range sums {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		d, ok := loc[name]
		require.True(t, ok, "replica %s is on no disk", name)
		dir := filepath.Join(diskPath(cfg, d), name)
		require.Equal(t, sums[name], exportSum(t, dir), "replica %s on %s: content changed", name, d)
		rpt, err := replica.Check([]string{dir}, nil)
		require.NoError(t, err)
		require.Equal(t, []string{dir}, rpt.RW, "replica %s on %s does not pass the start check", name, d)
	}
	return loc
}

func diskPath(cfg disks.Config, name string) string {
	for _, d := range cfg.Disks {
		if d.Name == name {
			return d.Path
		}
	}
	return ""
}

func ptr(v int64) *int64 { return &v }

// recorder collects events.
type recorder struct{ events []disks.Event }

func (r *recorder) on(e disks.Event) { r.events = append(r.events, e) }

func (r *recorder) kinds(kind string) []disks.Event {
	var out []disks.Event
	for _, e := range r.events {
		if e.Kind == kind {
			out = append(out, e)
		}
	}
	return out
}

func movedNames(ms []disks.Move) []string {
	var out []string
	for _, m := range ms {
		out = append(out, m.Replica)
	}
	slices.Sort(out)
	return out
}

// runPass runs one pass of an agent made from cfg under ctx, recording its
// events.
func runPass(t *testing.T, ctx context.Context, cfg disks.Config) (disks.PassResult, *recorder, error) {
	t.Helper()
	var rec recorder
	cfg.OnEvent = rec.on
	a, err := disks.New(cfg)
	require.NoError(t, err)
	defer a.Close()
	res, err := a.Pass(ctx)
	return res, &rec, err
}
