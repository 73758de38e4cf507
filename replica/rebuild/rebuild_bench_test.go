package rebuild

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/sparsesync/sparsesync/internal/testutil/loopfs"
)

// BenchmarkRebuild rebuilds a replica (1 GiB volume, 384 MiB of data in a
// head and two snapshots) into an empty directory, against cp doing the
// same copy in the same run: on one XFS (reflink: sparsesync and cp
// --reflink=always clone) and from ext4 to XFS (copy: cp --sparse=always).
// "resync" rebuilds a target that is already identical.
//
//	go test -run '^$' -bench Rebuild -benchtime 5x -count 3 ./replica/
func BenchmarkRebuild(b *testing.B) {
	for _, c := range []struct {
		name     string
		src, dst loopfs.Kind
		cpFlag   string
	}{
		{"xfs-reflink", loopfs.XFS, loopfs.XFS, "--reflink=always"},
		{"ext4-to-xfs", loopfs.Ext4, loopfs.XFS, "--sparse=always"},
	} {
		b.Run(c.name, func(b *testing.B) {
			smnt := loopfs.Mount(b, c.src, 3<<30)
			dmnt := smnt
			if c.dst != c.src {
				dmnt = loopfs.Mount(b, c.dst, 3<<30)
			}
			src := filepath.Join(smnt, "src")
			makeSourceLayers(b, src, 1<<30, 64<<20, 64<<20, 256<<20)
			const data = 384 << 20
			dst := filepath.Join(dmnt, "dst")
			b.Run("sparsesync", func(b *testing.B) {
				b.SetBytes(data)
				b.ReportAllocs()
				for b.Loop() {
					b.StopTimer()
					if err := os.RemoveAll(dst); err != nil {
						b.Fatal(err)
					}
					b.StartTimer()
					if _, err := Rebuild(b.Context(), src, dst, nil); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.Run("cp", func(b *testing.B) {
				b.SetBytes(data)
				for b.Loop() {
					b.StopTimer()
					if err := os.RemoveAll(dst); err != nil {
						b.Fatal(err)
					}
					b.StartTimer()
					if out, err := exec.Command("cp", "-a", c.cpFlag, src, dst).CombinedOutput(); err != nil {
						b.Fatalf("cp: %v: %s", err, out)
					}
					if out, err := exec.Command("sync", "-f", dst).CombinedOutput(); err != nil {
						b.Fatalf("sync: %v: %s", err, out)
					}
				}
			})
			b.Run("resync", func(b *testing.B) {
				if err := os.RemoveAll(dst); err != nil {
					b.Fatal(err)
				}
				if _, err := Rebuild(b.Context(), src, dst, nil); err != nil {
					b.Fatal(err)
				}
				b.SetBytes(data)
				b.ReportAllocs()
				for b.Loop() {
					if _, err := Rebuild(b.Context(), src, dst, nil); err != nil {
						b.Fatal(err)
					}
				}
			})
		})
	}
}
