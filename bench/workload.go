package bench

import (
	"context"
	"fmt"
	"io/fs"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/sparsesync/sparsesync/internal/bytesize"
	"github.com/sparsesync/sparsesync/internal/patternfile"
)

const (
	kib = int64(1) << 10
	mib = int64(1) << 20
	gib = int64(1) << 30
	blk = 4 * kib
)

// Workload is a named, reproducible source file: the same name, scale and
// seed give the same bytes and the same holes.
type Workload struct {
	Name        string
	Description string
	// Size is the file size at scale 1.
	Size int64
	// DataFraction is the share of Size that is data (for vm-image, what a
	// typical /usr/share fills): what a run reads and writes, for the time
	// estimate bench gives before it starts.
	DataFraction float64
	// build writes the file at path (it does not exist yet).
	build func(ctx context.Context, path string, size int64, seed uint64, g GenOptions) error
	// OptIn workloads run only when named (--workload): not by default.
	OptIn bool
	// check, if set, says before anything runs why build cannot work at
	// this size.
	check func(ctx context.Context, size int64, g GenOptions) error
}

// Check says, before any workload is made, why w cannot be made with g
// (a vm-image tree bigger than the image): minutes of work not wasted.
func (w Workload) Check(ctx context.Context, g *GenOptions) error {
	if err := g.Validate(); err != nil {
		return err
	}
	if w.check == nil {
		return nil
	}
	return w.check(ctx, w.ScaledSize(g), g.value())
}

// GenOptions tune workload generation. nil and the zero value mean the
// defaults.
type GenOptions struct {
	// Scale multiplies every size (1 when 0): tests use tiny workloads.
	Scale float64
	// Seed of the pseudo-random layout and changes (1 when 0).
	Seed uint64
	// TreeDir is the directory copied into the vm-image workload
	// (/usr/share when empty).
	TreeDir string
}

// Validate says why g cannot be used (a negative or non-finite Scale).
func (g *GenOptions) Validate() error {
	if g != nil && (g.Scale < 0 || math.IsNaN(g.Scale) || math.IsInf(g.Scale, 0)) {
		return fmt.Errorf("%w: Scale %v", ErrInvalidOptions, g.Scale)
	}
	return nil
}

// value is g, or the zero (default) options when g is nil.
func (g *GenOptions) value() GenOptions {
	if g == nil {
		return GenOptions{}
	}
	return *g
}

func (g GenOptions) scale() float64 {
	if g.Scale <= 0 {
		return 1
	}
	return g.Scale
}

func (g GenOptions) seed() uint64 {
	if g.Seed == 0 {
		return 1
	}
	return g.Seed
}

// Workloads returns every workload, in report order.
func Workloads() []Workload {
	return []Workload{
		{Name: "sparse-10pct", Size: 2 * gib, DataFraction: 0.10,
			Description: "2 GiB, 10% data in about 160 extents (64 KiB to 2.5 MiB)",
			build: func(ctx context.Context, p string, size int64, seed uint64, _ GenOptions) error {
				return patternfile.Write(p, scatter(size, 10, 160, seed))
			}},
		{Name: "tiny-extents", Size: 100_000 * 8 * kib, DataFraction: 0.5,
			Description: "100,000 extents of 4 KiB, one every 8 KiB",
			build: func(ctx context.Context, p string, size int64, _ uint64, _ GenOptions) error {
				l := patternfile.Layout{Name: "tiny-extents", Size: size}
				for off := int64(0); off+blk <= size; off += 2 * blk {
					l.Data = append(l.Data, patternfile.Range{Off: off, Len: blk})
				}
				return patternfile.Write(p, l)
			}},
		{Name: "dense", Size: gib, DataFraction: 1,
			Description: "1 GiB, all data",
			build: func(ctx context.Context, p string, size int64, _ uint64, _ GenOptions) error {
				return patternfile.Write(p, patternfile.Layout{Name: "dense", Size: size, Data: []patternfile.Range{{Off: 0, Len: size}}})
			}},
		{Name: "sparse-1pct-large", Size: 8 * gib, DataFraction: 0.01,
			Description: "8 GiB, 1% data in about 160 extents",
			build: func(ctx context.Context, p string, size int64, seed uint64, _ GenOptions) error {
				return patternfile.Write(p, scatter(size, 1, 160, seed))
			}},
		{Name: "wide", Size: wideExtents * wideStride, DataFraction: float64(blk) / float64(wideStride), OptIn: true,
			Description: "2 TiB apparent, 1,100,000 extents of 4 KiB, one every 1.9 MiB (issue 26's file; only when named; --scale scales the extent count)",
			build: func(ctx context.Context, p string, size int64, _ uint64, _ GenOptions) error {
				l := patternfile.Layout{Name: "wide", Size: size}
				for off := int64(0); off+blk <= size; off += wideStride {
					l.Data = append(l.Data, patternfile.Range{Off: off, Len: blk})
				}
				return patternfile.Write(p, l)
			}},
		{Name: "vm-image", Size: 2 * gib, DataFraction: 0.4,
			Description: "2 GiB ext4 image made by mkfs.ext4 -d from a real directory tree (/usr/share)",
			build:       buildVMImage, check: checkVMImage},
	}
}

// The wide workload: many extents far apart, as a fragmented terabyte
// image holds them.
const (
	wideExtents = 1_100_000
	wideStride  = 1900 * kib // 1.9 MiB, a multiple of 4 KiB
)

// WorkloadNamed returns the workload called name.
func WorkloadNamed(name string) (Workload, error) {
	for _, w := range Workloads() {
		if w.Name == name {
			return w, nil
		}
	}
	return Workload{}, fmt.Errorf("%w %q", ErrUnknownWorkload, name)
}

// ScaledSize is the workload's size at the options' scale (whole 4 KiB
// blocks, at least 64 KiB).
func (w Workload) ScaledSize(g *GenOptions) int64 {
	s := int64(float64(w.Size)*g.value().scale()) / blk * blk
	return max(s, 64*kib)
}

// ScaledData is about how many bytes of data the workload holds with g.
func (w Workload) ScaledData(g *GenOptions) int64 {
	return int64(float64(w.ScaledSize(g)) * w.DataFraction)
}

// Generate writes the workload's file at path.
func (w Workload) Generate(ctx context.Context, path string, g *GenOptions) error {
	if err := g.Validate(); err != nil {
		return err
	}
	if err := w.build(ctx, path, w.ScaledSize(g), g.value().seed(), g.value()); err != nil {
		os.Remove(path)
		return fmt.Errorf("workload %s: %s: %w", w.Name, path, err)
	}
	return nil
}

// scatter lays out extents data extents holding pct percent of size: the
// file is cut into that many equal slots and each slot gets one extent of
// 0.5 to 1.5 times the mean length, 4 KiB aligned, at a random place.
func scatter(size int64, pct, extents int, seed uint64) patternfile.Layout {
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	slot := size / int64(extents) / blk * blk
	if slot < 2*blk {
		slot, extents = 2*blk, int(size/(2*blk))
	}
	mean := slot * int64(pct) / 100
	l := patternfile.Layout{Name: "scatter", Size: size}
	for i := range int64(extents) {
		n := (mean/2 + rng.Int64N(mean+1)) / blk * blk
		n = min(max(n, blk), slot)
		off := i*slot + rng.Int64N((slot-n)/blk+1)*blk
		l.Data = append(l.Data, patternfile.Range{Off: off, Len: n})
	}
	return l
}

// vmImageTree is the tree the vm-image workload copies.
func vmImageTree(g GenOptions) string {
	if g.TreeDir == "" {
		return "/usr/share"
	}
	return g.TreeDir
}

// checkVMImage refuses a tree that cannot fit in an ext4 image of size:
// its files' 4 KiB blocks (and one per directory) beside ext4's own
// metadata (inode tables at mkfs's 1 inode per 16 KiB, the journal), or
// more files than the image has inodes. The figures err on the side of
// trying: only a tree that surely does not fit is refused.
func checkVMImage(ctx context.Context, size int64, g GenOptions) error {
	tree := vmImageTree(g)
	var blocks, inodes int64
	err := filepath.WalkDir(tree, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p == tree {
				return err
			}
			return nil // unreadable below the top: mkfs will say so itself
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		inodes++
		switch {
		case d.IsDir():
			blocks++
		case d.Type().IsRegular():
			if fi, err := d.Info(); err == nil {
				blocks += (fi.Size() + blk - 1) / blk
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("vm-image: --tree %s: %w", tree, err)
	}
	need := blocks*blk + size/64 + ext4JournalSize(size)
	if need > size || inodes > size/(16*kib) {
		return fmt.Errorf("%w: %s holds %d files in %s of 4 KiB blocks; the %s image at this scale holds %s and %d files (use a larger --scale or a smaller --tree)",
			ErrTreeTooBig, tree, inodes, bytesize.Format(blocks*blk), bytesize.Format(size), bytesize.Format(size-size/64-ext4JournalSize(size)), size/(16*kib))
	}
	return nil
}

// ext4JournalSize is mkfs.ext4's default journal for a filesystem of size
// bytes with 4 KiB blocks (ext2fs_default_journal_size).
func ext4JournalSize(size int64) int64 {
	switch b := size / blk; {
	case b < 2048:
		return 0
	case b < 32768:
		return 1024 * blk
	case b < 256*1024:
		return 4096 * blk
	case b < 512*1024:
		return 8192 * blk
	case b < 4096*1024:
		return 16384 * blk
	}
	return 32768 * blk
}

// buildVMImage makes an ext4 filesystem image on a sparse file of the given
// size, filled by mkfs.ext4 -d with a copy of a real directory tree: the
// extents and contents of a VM disk, made without mounting anything.
func buildVMImage(ctx context.Context, p string, size int64, _ uint64, g GenOptions) error {
	tree := vmImageTree(g)
	if _, err := exec.LookPath("mkfs.ext4"); err != nil {
		return fmt.Errorf("mkfs.ext4 not found (package e2fsprogs): %w", err)
	}
	f, err := os.Create(p)
	if err != nil {
		return err
	}
	err = f.Truncate(size)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	// Fixed UUID and hash seed: the same tree gives the same image.
	cmd := exec.CommandContext(ctx, "mkfs.ext4", "-q", "-F", "-b", "4096",
		"-U", "6b1f0c3e-5d2a-4e59-9a3c-2f64a1b7c001",
		"-E", "nodiscard,lazy_itable_init=0,lazy_journal_init=0,hash_seed=0b5f2c1e-3a4d-4c6e-8f70-9a1b2c3d4e5f",
		"-d", tree, p)
	cmd.Env = append(os.Environ(), "E2FSPROGS_FAKE_TIME=1700000000")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("mkfs.ext4 -d %s: %w: %s", tree, err, out)
	}
	return nil
}
