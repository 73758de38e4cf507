package benchtest

import (
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/sparsesync/sparsesync/bench"
	"github.com/sparsesync/sparsesync/internal/testutil/loopfs"
	"github.com/sparsesync/sparsesync/localsync"
)

// scale is -workload-scale.
var scale = flag.Float64("workload-scale", 1.0/16, "size of bench's named workloads in the Workloads benchmarks (1: full size, 2 GiB to 8 GiB)")

// Gen returns the generation options: the flag's scale, seed 1.
func Gen() *bench.GenOptions { return &bench.GenOptions{Scale: *scale, Seed: 1} }

// Dir returns a directory to run the workloads in: a fresh ext4 loop
// filesystem (room for the largest at full scale, a source, its changed
// copy and a target) when running as root, else a temporary directory.
func Dir(b *testing.B) string {
	b.Helper()
	if os.Geteuid() != 0 {
		return b.TempDir()
	}
	return loopfs.Mount(b, loopfs.Ext4, 12<<30)
}

// Each runs fn as a sub-benchmark of b for each workload, named after it,
// with the workload generated (Gen) at path in dir and removed afterwards.
// A workload that cannot be generated here is skipped (vm-image without
// mkfs.ext4, or too small a scale for its tree).
func Each(b *testing.B, dir string, fn func(b *testing.B, w bench.Workload, path string)) {
	for _, w := range bench.Workloads() {
		if w.OptIn {
			continue // run by name only (bench --workload)
		}
		b.Run(w.Name, func(b *testing.B) {
			path := filepath.Join(dir, w.Name)
			if err := w.Generate(b.Context(), path, Gen()); err != nil {
				b.Skip(err)
			}
			defer os.Remove(path)
			fn(b, w, path)
		})
	}
}

// Source returns the source of scenario for the workload at base: base
// itself for bench.ScenarioCopy, else a copy of base (no shared blocks)
// changed by the scenario's script, removed when b ends.
func Source(b *testing.B, base, scenario string) string {
	b.Helper()
	if scenario == bench.ScenarioCopy {
		return base
	}
	src := base + "." + scenario
	b.Cleanup(func() { os.Remove(src) })
	if _, err := localsync.Copy(b.Context(), base, src, &localsync.Options{Reflink: localsync.ReflinkNever}); err != nil {
		b.Fatal(err)
	}
	ch, err := bench.ChangeNamed(scenario)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := ch.Apply(b.Context(), src, Gen().Seed); err != nil {
		b.Fatal(err)
	}
	return src
}
