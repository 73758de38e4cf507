package tcpsync

import (
	"fmt"
	"sort"

	"github.com/sparsesync/sparsesync/sparse"
)

// chunk is a run of up to chunkBlocks consecutive source-data blocks: the
// unit of hierarchical compare, of verification and of resume.
type chunk struct {
	start, end int64           // span: from the first block's start to the last block's end
	ext        []sparse.Extent // the source-data blocks (whole blocks, merged)
	cmp        []sparse.Extent // the subset the destination also holds data in
	ncmp       int             // blocks in cmp
}

// plan is what both sides derive from the two maps; they must agree exactly.
type plan struct {
	size   int64
	bs     int64
	blocks sparse.Map // source blocks holding any data
	punch  sparse.Map // destination data over source holes (exact, not per block)
	src    sparse.Map // the source's data as its map says, for writing only that
	chunks []chunk
	// dataBytes counts the source's data blocks; cmpBytes those compared.
	dataBytes, cmpBytes int64
}

// newPlan partitions the source's data blocks into chunks and sorts them into
// "compare" (the destination has data in the block and the block has the
// same length on both sides) and "send". Pure: no I/O, no ctx.
func newPlan(src, dst sparse.Map, bs int64) (*plan, error) {
	size := src.Size()
	p := &plan{size: size, bs: bs, blocks: src.RoundOut(bs), src: src}
	dstIn := dst.Resize(size)
	// Punch the source's exact holes, not only whole holes of bs: data is
	// written only where the source has data (writeData), so a block
	// holding both keeps its holes. The destination's data is rounded out to
	// 4 KiB first: an extent that ended at the old, unaligned size occupies
	// its whole last block once the file has grown, and growing a file from
	// an unaligned size makes some filesystems (btrfs) write zeros into that
	// block even where it was a hole.
	dstData := dstIn.RoundOut(4096).Resize(size)
	if old := dst.Size(); old < size && old%4096 != 0 {
		tail, err := sparse.NewMap(size, sparse.Extent{Off: old &^ 4095, Len: min(4096, size-old&^4095)})
		if err != nil {
			return nil, err
		}
		dstData = dstData.Union(tail)
	}
	p.punch = dstData.Intersect(src.Holes())
	cmpLimit := min(size, dst.Size())
	if dst.Size() != size {
		cmpLimit -= cmpLimit % bs
	}
	dstBlocks := dstIn.RoundOut(bs).Resize(cmpLimit).Resize(size)
	cmp := p.blocks.Intersect(dstBlocks)
	p.dataBytes = p.blocks.Bytes()
	p.cmpBytes = cmp.Bytes()
	cmpExt := cmp.Extents()
	var cur chunk
	n := 0
	flush := func() {
		if len(cur.ext) == 0 {
			return
		}
		cur.start = cur.ext[0].Off
		cur.end = cur.ext[len(cur.ext)-1].End()
		// Compare extents inside the chunk's span.
		i := sort.Search(len(cmpExt), func(i int) bool { return cmpExt[i].End() > cur.start })
		for ; i < len(cmpExt) && cmpExt[i].Off < cur.end; i++ {
			e := cmpExt[i]
			off, end := max(e.Off, cur.start), min(e.End(), cur.end)
			cur.cmp = append(cur.cmp, sparse.Extent{Off: off, Len: end - off})
			cur.ncmp += int(blocksIn(end-off, bs))
		}
		p.chunks = append(p.chunks, cur)
		cur = chunk{}
		n = 0
	}
	for _, e := range p.blocks.Extents() {
		for off := e.Off; off < e.End(); {
			take := min(e.End()-off, int64(chunkBlocks-n)*bs)
			cur.ext = append(cur.ext, sparse.Extent{Off: off, Len: take})
			n += int(blocksIn(take, bs))
			off += take
			if n >= chunkBlocks {
				flush()
			}
		}
	}
	flush()
	return p, nil
}

// blocksIn counts blocks of size bs in n bytes (the last may be short).
func blocksIn(n, bs int64) int64 { return (n + bs - 1) / bs }

// chunkAt returns the index of the chunk whose span holds off, or -1.
func (p *plan) chunkAt(off int64) int {
	i := sort.Search(len(p.chunks), func(i int) bool { return p.chunks[i].end > off })
	if i < len(p.chunks) && p.chunks[i].start <= off {
		return i
	}
	return -1
}

// firstChunkAfter returns the index of the first chunk that starts at or
// after off (a resume offset), which must be a chunk boundary.
func (p *plan) firstChunkAfter(off int64) (int, error) {
	if off == 0 {
		return 0, nil
	}
	i := sort.Search(len(p.chunks), func(i int) bool { return p.chunks[i].end >= off })
	if i < len(p.chunks) && p.chunks[i].end == off {
		return i + 1, nil
	}
	return 0, fmt.Errorf("%w: resume offset %d is not a chunk boundary", ErrProtocol, off)
}

func validBlockSize(bs uint32) bool {
	return bs >= minBlock && bs <= maxBlock && bs&(bs-1) == 0
}
