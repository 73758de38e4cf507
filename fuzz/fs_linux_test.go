package fuzz

import (
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"

	"github.com/sparsesync/sparsesync/internal/testutil/loopfs"
)

// FSEnv names the filesystem a fuzzing run (go test -fuzz) uses.
const FSEnv = "SPARSESYNC_FUZZ_FS"

// HeavyEnv, set to 1, runs the seed corpus on the loop filesystems too
// (root only): it keeps the README's test command short.
const HeavyEnv = "SPARSESYNC_HEAVY"

// fsys is a mounted scratch filesystem.
type fsys struct {
	kind loopfs.Kind
	dir  string
}

// fuzzing reports whether this process runs the fuzz engine (-test.fuzz),
// rather than only the seed corpus.
func fuzzing() bool {
	f := flag.Lookup("test.fuzz")
	return f != nil && f.Value.String() != ""
}

// pick is what a case runs through: every option set for the seed corpus,
// and when fuzzing only the one its Pick byte chooses, so that the engine
// spends its time on new inputs (one input through all 16-32 local option
// sets made FuzzLocal run about 5 inputs a minute) and can still reach every
// option set by mutating that byte.
func pick[T any](runs []T, c fcase) []T {
	if !fuzzing() || len(runs) == 0 {
		return runs
	}
	return runs[int(c.Pick)%len(runs) : int(c.Pick)%len(runs)+1]
}

// filesystems mounts what a target runs on. Fuzzing: the one named by
// SPARSESYNC_FUZZ_FS (tmpfs by default). The seed corpus: tmpfs, and as
// root with SPARSESYNC_HEAVY=1 ext4, XFS and btrfs too; a kind whose mkfs
// is missing is left out with a log line, unless loopfs.Required.
func filesystems(f *testing.F) []fsys {
	f.Helper()
	if fuzzing() {
		kind := loopfs.Kind(os.Getenv(FSEnv))
		if kind == "" {
			kind = loopfs.Tmpfs
		}
		if !slices.Contains(loopfs.All, kind) {
			f.Fatalf("%s=%q: want one of %v", FSEnv, kind, loopfs.All)
		}
		return []fsys{{kind, loopfs.Mount(f, kind, 1<<30)}}
	}
	kinds := []loopfs.Kind{loopfs.Tmpfs}
	if os.Geteuid() == 0 && os.Getenv(HeavyEnv) == "1" {
		kinds = loopfs.All
	} else {
		f.Logf("seed corpus on tmpfs only (ext4, XFS and btrfs need root and %s=1, as .ci/run sets)", HeavyEnv)
	}
	var out []fsys
	for _, k := range kinds {
		if k != loopfs.Tmpfs && !loopfs.Required() {
			if _, err := exec.LookPath("mkfs." + string(k)); err != nil {
				f.Logf("no %s: mkfs.%s not found", k, k)
				continue
			}
		}
		out = append(out, fsys{k, loopfs.Mount(f, k, 1<<30)})
	}
	return out
}

// scratch makes a fresh directory for one input on fs, removed afterwards.
func scratch(t *testing.T, fs fsys) string {
	t.Helper()
	dir, err := os.MkdirTemp(fs.dir, "case-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// path joins names under dir.
func path(dir string, name ...string) string { return filepath.Join(append([]string{dir}, name...)...) }
