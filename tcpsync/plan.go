package tcpsync

import (
	"fmt"
	"sort"

	"github.com/sparsesync/sparsesync/internal/destplan"
	"github.com/sparsesync/sparsesync/internal/wire"
	"github.com/sparsesync/sparsesync/sparse"
)

// chunk is a run of up to wire.ChunkBlocks consecutive source-data blocks: the
// unit of hierarchical compare, of verification and of resume.
type chunk struct {
	start, end int64           // span: from the first block's start to the last block's end
	ext        []sparse.Extent // the source-data blocks (whole blocks, merged)
	cmp        []sparse.Extent // the subset the destination also holds data in
	ncmp       int             // blocks in cmp
}

// plan is what both sides derive from the two maps; they must agree exactly.
// Its maps come from internal/destplan, the one rule shared with localsync.
//
// Its memory is bounded by the extents of the two maps (which the peer has
// sent and paid for), never by the size a peer claims: chunks are computed
// when asked for (chunk, chunkAt), from the data blocks' extents and a
// prefix count of their blocks. A claimed size of 2^50 with one extent
// costs a few hundred bytes, not one struct per chunk.
type plan struct {
	size   int64
	bs     int64
	blocks sparse.Map // source blocks holding any data (destplan's Data)
	src    sparse.Map // the source's data as its map says, for writing only that
	cmp    []sparse.Extent
	// punch and held shape the target (receiver only): punch is exact to
	// the source's holes and covers what growing from an unaligned size
	// allocates; a ZERO range is punched where it meets held.
	punch, held sparse.Map
	resize      bool // the target's size is not size yet
	// cum[i] is the number of data blocks before blocks.Extents()[i].
	cum     []int64
	nblocks int64
	nchunks int
	// dataBytes counts the source's data blocks; cmpBytes those compared.
	dataBytes, cmpBytes int64
}

// newPlan sorts the source's data blocks into "compare" (the destination
// has data in the block and the block has the same length on both sides)
// and "send", and numbers them for chunking. Pure: no I/O, no ctx.
func newPlan(src, dst sparse.Map, bs int64) (*plan, error) {
	return planFor(destplan.Input{Src: src, Dst: dst, Unit: bs})
}

// planFor is newPlan with all of destplan's input: a receiver adds its
// target's hidden allocation, which changes only what it punches, never
// the blocks both sides agree on.
func planFor(in destplan.Input) (*plan, error) {
	d, err := destplan.Make(in)
	if err != nil {
		return nil, err
	}
	p := &plan{size: d.Size, bs: in.Unit, blocks: d.Data, src: in.Src, punch: d.Punch, held: d.Held, resize: d.Resize}
	p.dataBytes = p.blocks.Bytes()
	p.cmpBytes = d.Compare.Bytes()
	p.cmp = d.Compare.Extents()
	ext := p.blocks.Extents()
	p.cum = make([]int64, len(ext))
	for i, e := range ext {
		p.cum[i] = p.nblocks
		p.nblocks += blocksIn(e.Len, in.Unit)
	}
	p.nchunks = int((p.nblocks + wire.ChunkBlocks - 1) / wire.ChunkBlocks)
	return p, nil
}

// blocksIn counts blocks of size bs in n bytes (the last may be short).
func blocksIn(n, bs int64) int64 { return (n + bs - 1) / bs }

// blockOff returns the offset of data block number b (0 <= b < nblocks).
func (p *plan) blockOff(b int64) (int, int64) {
	i := sort.Search(len(p.cum), func(i int) bool { return p.cum[i] > b }) - 1
	return i, p.blocks.Extents()[i].Off + (b-p.cum[i])*p.bs
}

// chunk computes chunk k (0 <= k < nchunks).
func (p *plan) chunk(k int) chunk {
	var c chunk
	first := int64(k) * wire.ChunkBlocks
	left := min(int64(wire.ChunkBlocks), p.nblocks-first)
	ext := p.blocks.Extents()
	i, off := p.blockOff(first)
	for ; left > 0 && i < len(ext); i++ {
		e := ext[i]
		if off < e.Off {
			off = e.Off
		}
		take := min(e.End()-off, left*p.bs)
		c.ext = append(c.ext, sparse.Extent{Off: off, Len: take})
		left -= blocksIn(take, p.bs)
	}
	c.start = c.ext[0].Off
	c.end = c.ext[len(c.ext)-1].End()
	// Compare extents inside the chunk's span.
	j := sort.Search(len(p.cmp), func(j int) bool { return p.cmp[j].End() > c.start })
	for ; j < len(p.cmp) && p.cmp[j].Off < c.end; j++ {
		e := p.cmp[j]
		lo, hi := max(e.Off, c.start), min(e.End(), c.end)
		c.cmp = append(c.cmp, sparse.Extent{Off: lo, Len: hi - lo})
		c.ncmp += int(blocksIn(hi-lo, p.bs))
	}
	return c
}

// chunkAt returns the index of the chunk whose span holds off, or -1.
func (p *plan) chunkAt(off int64) int {
	ext := p.blocks.Extents()
	i := sort.Search(len(ext), func(i int) bool { return ext[i].End() > off })
	if i == len(ext) || off < 0 {
		return -1
	}
	b := p.cum[i] // the next data block (off is in a hole before it)
	if ext[i].Off <= off {
		b += (off - ext[i].Off) / p.bs
	}
	k := int(b / wire.ChunkBlocks)
	if b%wire.ChunkBlocks == 0 && ext[i].Off > off {
		return -1 // in the hole before a chunk's first block
	}
	return k
}

// nextCmpChunk returns the first chunk from k on that holds compare
// blocks, or nchunks.
func (p *plan) nextCmpChunk(k int) int {
	if k >= p.nchunks {
		return p.nchunks
	}
	_, start := p.blockOff(int64(k) * wire.ChunkBlocks)
	j := sort.Search(len(p.cmp), func(j int) bool { return p.cmp[j].End() > start })
	if j == len(p.cmp) {
		return p.nchunks
	}
	return max(k, p.chunkAt(max(p.cmp[j].Off, start)))
}

// firstChunkAfter returns the index of the first chunk that starts at or
// after off (a resume offset), which must be a chunk boundary.
func (p *plan) firstChunkAfter(off int64) (int, error) {
	if off == 0 {
		return 0, nil
	}
	if k := p.chunkAt(off - 1); k >= 0 && p.chunk(k).end == off {
		return k + 1, nil
	}
	return 0, fmt.Errorf("%w: resume offset %d is not a chunk boundary", ErrProtocol, off)
}

func validBlockSize(bs uint32) bool {
	return bs >= wire.MinBlock && bs <= wire.MaxBlock && bs&(bs-1) == 0
}
