package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"

	"github.com/sparsesync/sparsesync/internal/patternfile"
	"github.com/sparsesync/sparsesync/sparse"
)

// Change is a named change script: what happens to a source between two
// syncs. Apply modifies a copy of the workload in place and returns the
// bytes whose content changed (written or punched), which a re-sync must
// at least write.
type Change struct {
	Name        string
	Description string
	apply       func(ctx context.Context, f *os.File, data sparse.Map, rng *rand.Rand) (int64, error)
}

// Changes returns every change script.
func Changes() []Change {
	return []Change{
		{Name: "resync-1pct", Description: "1% of the data's 4 KiB blocks rewritten, at random", apply: rewriteBlocks},
		{Name: "append", Description: "1% of the size appended as new data", apply: appendData},
		{Name: "trim", Description: "1% of the data discarded (holes punched) in 64 KiB pieces", apply: trimData},
	}
}

// Scenarios returns the name of every scenario: ScenarioCopy, then each
// change script's, in report order.
func Scenarios() []string {
	names := []string{ScenarioCopy}
	for _, c := range Changes() {
		names = append(names, c.Name)
	}
	return names
}

// ChangeNamed returns the change script called name.
func ChangeNamed(name string) (Change, error) {
	for _, c := range Changes() {
		if c.Name == name {
			return c, nil
		}
	}
	return Change{}, fmt.Errorf("%w %q", ErrUnknownChange, name)
}

// Apply runs the script on the file at path (seeded: the same seed and
// file give the same change) and returns the changed bytes.
func (c Change) Apply(ctx context.Context, path string, seed uint64) (int64, error) {
	data, _, err := sparse.ReadMap(ctx, path)
	if err != nil {
		return 0, err
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return 0, err
	}
	n, err := c.apply(ctx, f, data, rand.New(rand.NewPCG(seed, 0xc4a96e)))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return n, fmt.Errorf("change %s: %s: %w", c.Name, path, err)
	}
	return n, nil
}

// pickBlocks returns n distinct random offsets of size-byte pieces inside
// the data extents (aligned to size within each extent), sorted.
func pickBlocks(data sparse.Map, n int64, size int64, rng *rand.Rand) []int64 {
	var pieces []int64
	for _, e := range data.Extents() {
		for off := (e.Off + size - 1) / size * size; off+size <= e.End(); off += size {
			pieces = append(pieces, off)
		}
	}
	rng.Shuffle(len(pieces), func(i, j int) { pieces[i], pieces[j] = pieces[j], pieces[i] })
	pieces = pieces[:min(int64(len(pieces)), n)]
	slices.Sort(pieces)
	return pieces
}

// changed fills b with new content for offset off: never zero, and never
// equal to what patternfile.Pattern wrote there.
func changed(b []byte, off int64) {
	patternfile.Pattern(b, off)
	for i := range b {
		b[i] ^= 0x5a
		if b[i] == 0 {
			b[i] = 0x5a
		}
	}
}

func rewriteBlocks(ctx context.Context, f *os.File, data sparse.Map, rng *rand.Rand) (int64, error) {
	offs := pickBlocks(data, max(data.Bytes()/blk/100, 1), blk, rng)
	b := make([]byte, blk)
	for _, off := range offs {
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		changed(b, off)
		if _, err := f.WriteAt(b, off); err != nil {
			return 0, err
		}
	}
	return int64(len(offs)) * blk, nil
}

func appendData(ctx context.Context, f *os.File, data sparse.Map, _ *rand.Rand) (int64, error) {
	size := data.Size()
	n := max(size/100/blk*blk, blk)
	b := make([]byte, mib)
	for off := size; off < size+n; off += int64(len(b)) {
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		m := min(int64(len(b)), size+n-off)
		changed(b[:m], off)
		if _, err := f.WriteAt(b[:m], off); err != nil {
			return 0, err
		}
	}
	return n, nil
}

func trimData(ctx context.Context, f *os.File, data sparse.Map, rng *rand.Rand) (int64, error) {
	piece := 64 * kib
	offs := pickBlocks(data, max(data.Bytes()/piece/100, 1), piece, rng)
	if len(offs) == 0 { // no 64 KiB of contiguous data: trim single blocks
		piece = blk
		offs = pickBlocks(data, max(data.Bytes()/piece/100, 1), piece, rng)
	}
	for _, off := range offs {
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		if punched, err := sparse.PunchHole(f, off, piece); err != nil {
			return 0, err
		} else if !punched {
			if err := sparse.WriteZeros(f, off, piece); err != nil {
				return 0, err
			}
		}
	}
	return int64(len(offs)) * piece, nil
}
