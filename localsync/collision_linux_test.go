package localsync_test

import (
	"bytes"
	"encoding/binary"
	"math/bits"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/cespare/xxhash/v2"
	"github.com/stretchr/testify/require"

	"github.com/sparsesync/sparsesync/internal/testutil/loopfs"
	"github.com/sparsesync/sparsesync/localsync"
)

// xxhash64 constants (the algorithm's published primes).
const (
	xxPrime1 uint64 = 11400714785074694791
	xxPrime2 uint64 = 14029467366897019727
)

// xxRound is one xxhash64 accumulator step over an 8-byte lane.
func xxRound(acc, lane uint64) uint64 {
	return bits.RotateLeft64(acc+lane*xxPrime2, 31) * xxPrime1
}

// inverse64 is x's inverse modulo 2^64 (x odd), by Newton's iteration.
func inverse64(x uint64) uint64 {
	y := x // correct to 3 bits for any odd x
	for range 5 {
		y *= 2 - x*y
	}
	return y
}

// xxCollision returns a copy of a (at least 64 bytes) that differs from it
// in two 8-byte lanes yet has the same unseeded xxhash64. The first lane of
// the first stripe feeds accumulator v1; changing it changes v1 to v1', and
// the first lane of the second stripe, L, then enters as v1' + L*P2. Setting
// L' = L + (v1 - v1')*P2^-1 makes that sum, and so every later state, the
// same. The length is unchanged, so the final hash is too.
func xxCollision(a []byte) []byte {
	b := bytes.Clone(a)
	l0 := binary.LittleEndian.Uint64(a[0:])
	l1 := binary.LittleEndian.Uint64(a[32:])
	p1 := xxPrime1
	v1 := p1 + xxPrime2 // seed 0, wrapping
	l0b := l0 ^ 0x0102030405060708
	x, y := xxRound(v1, l0), xxRound(v1, l0b)
	l1b := l1 + (x-y)*inverse64(xxPrime2)
	binary.LittleEndian.PutUint64(b[0:], l0b)
	binary.LittleEndian.PutUint64(b[32:], l1b)
	return b
}

func TestXXCollisionConstruction(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{64, 4096, 64 << 10} {
		a := make([]byte, n)
		for i := range a {
			a[i] = byte(r.Uint32())
		}
		b := xxCollision(a)
		require.False(t, bytes.Equal(a, b))
		require.Equal(t, xxhash.Sum64(a), xxhash.Sum64(b), "no collision for %d bytes", n)
	}
}

// TestHashCollision re-syncs a destination whose blocks differ from the
// source's yet have the same unseeded xxhash64 (constructed, see
// xxCollision): anyone who controls the source can make such blocks, so a
// comparison by that hash would leave them stale. The copy must end exact,
// at the default block size and at 64 KiB.
func TestHashCollision(t *testing.T) {
	runAll(t, 512*mib, func(t *testing.T, kind loopfs.Kind, dir string) {
		for _, bs := range []int64{0, 64 * kib} {
			blk := max(bs, localsync.DefaultBlockSize)
			r := rand.New(rand.NewPCG(uint64(blk), 7))
			src := make([]byte, 4*mib)
			for i := range src {
				src[i] = byte(r.Uint32())
			}
			dst := bytes.Clone(src)
			// Three colliding blocks: the first, one inside, the last.
			offs := []int64{0, 37 * blk, int64(len(src)) - blk}
			for _, off := range offs {
				a := src[off : off+blk]
				b := xxCollision(a)
				require.Equal(t, xxhash.Sum64(a), xxhash.Sum64(b))
				copy(dst[off:], b)
			}
			sp, dp := filepath.Join(dir, "src"), filepath.Join(dir, "dst")
			require.NoError(t, os.WriteFile(sp, src, 0o644))
			require.NoError(t, os.WriteFile(dp, dst, 0o644))
			require.False(t, bytes.Equal(fileBytes(t, sp), fileBytes(t, dp)))

			// Reflink never: the byte comparison is what is tested, also
			// where a re-sync would clone (TestResyncByCloning).
			st, err := localsync.Copy(t.Context(), sp, dp, &localsync.Options{BlockSize: bs, Reflink: localsync.ReflinkNever})
			require.NoError(t, err)
			require.Equal(t, src, fileBytes(t, dp), "block size %d: destination not exact", blk)
			require.Equal(t, int64(len(offs))*blk, st.CopiedBytes+st.ClonedBytes, "block size %d: %+v", blk, st)
			checkStatsAdd(t, st)
		}
	})
}
