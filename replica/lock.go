package replica

import (
	"sync"
	"unsafe"

	"github.com/sparsesync/sparsesync/internal/coldread"
)

// nStripes is the number of block lock stripes: block b is guarded by
// stripe b % nStripes, so writes to different blocks rarely share a lock.
const nStripes = 256

// blockLocks serializes read-modify-write of a 4 KiB block against every
// other write touching that block. Aligned writes and unmaps take their
// blocks' stripes shared (they never read back, so they may run together);
// a write with an unaligned edge takes them exclusive. Stripes are always
// taken in ascending order, so two writes cannot deadlock.
type blockLocks [nStripes]sync.RWMutex

// spans returns the stripe ranges (ascending, inclusive) covering blocks
// first..last.
func stripeSpans(first, last int64) (spans [2][2]int, n int) {
	cnt := last - first + 1
	if cnt >= nStripes {
		return [2][2]int{{0, nStripes - 1}}, 1
	}
	lo := int(first % nStripes)
	hi := lo + int(cnt) - 1
	if hi < nStripes {
		return [2][2]int{{lo, hi}}, 1
	}
	return [2][2]int{{0, hi - nStripes}, {lo, nStripes - 1}}, 2
}

func (l *blockLocks) lock(first, last int64, exclusive bool) { l.each(first, last, exclusive, false) }

func (l *blockLocks) unlock(first, last int64, exclusive bool) { l.each(first, last, exclusive, true) }

// each takes (or, with release, gives back) the stripes of blocks
// first..last, shared or exclusive: one loop, so that release mirrors take.
// The switch is on two booleans the caller fixed: no indirect call on the
// write path.
func (l *blockLocks) each(first, last int64, exclusive, release bool) {
	spans, n := stripeSpans(first, last)
	for _, s := range spans[:n] {
		for i := s[0]; i <= s[1]; i++ {
			switch {
			case exclusive && release:
				l[i].Unlock()
			case exclusive:
				l[i].Lock()
			case release:
				l[i].RUnlock()
			default:
				l[i].RLock()
			}
		}
	}
}

// bounceSize is the size of the aligned buffers used when a caller's buffer
// or range cannot go to an O_DIRECT file as is.
const bounceSize = 128 << 10

// newBouncePool returns a pool of bounceSize aligned buffers: one per
// replica, so that no buffer outlives the replicas that use it.
func newBouncePool() *sync.Pool {
	return &sync.Pool{New: func() any {
		b := alignedBuf(bounceSize)
		return &b
	}}
}

// alignedBuf returns n bytes whose address is a multiple of BlockSize, as
// O_DIRECT requires: coldread.AlignedBuffer, the module's one aligned
// buffer, whose alignment is BlockSize (the array below does not compile
// otherwise).
func alignedBuf(n int) []byte { return coldread.AlignedBuffer(n) }

var _ [0]struct{} = [BlockSize - coldread.Align]struct{}{}

func isAligned(p []byte) bool {
	return len(p) == 0 || uintptr(unsafe.Pointer(&p[0]))&(BlockSize-1) == 0
}

func roundDown(x int64) int64 { return x &^ (BlockSize - 1) }
func roundUp(x int64) int64   { return (x + BlockSize - 1) &^ (BlockSize - 1) }
