package bench

import (
	"context"
	"errors"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sparsesync/sparsesync/internal/coldread"
	"github.com/sparsesync/sparsesync/internal/rawfd"
	"github.com/sparsesync/sparsesync/sparse"
)

const (
	floorChunk = 1 << 20 // bytes per request
	floorQD    = 16      // requests in flight per direction
	// floorWriteback: a way that writes through the page cache starts the
	// writeback of what it wrote every floorWriteback bytes, as a copy
	// that syncs its target does (localsync, tcpsync: 8 MiB), so that the
	// device writes while the reads go on; left to the final fdatasync,
	// the writes followed the reads, and on 2026-11-30 ext4 copies ran at
	// 0.57-0.85x such a floor.
	floorWriteback = 8 << 20
)

// openFloor opens path with O_DIRECT when direct (buffered where the
// filesystem refuses O_DIRECT, as tmpfs before Linux 6.6), else through
// the page cache. Making the workload cold is the runner's, as for the
// tools (Host.Evict).
func openFloor(path string, flag int, perm os.FileMode, direct bool) (*os.File, error) {
	if direct {
		f, err := os.OpenFile(path, flag|unix.O_DIRECT, perm)
		if !errors.Is(err, unix.EINVAL) {
			return f, err
		}
	}
	return os.OpenFile(path, flag, perm)
}

// floorWay is a way of measuring the floor: which sides use O_DIRECT.
type floorWay int

const (
	wayDirect     floorWay = iota // reads and writes with O_DIRECT
	wayBuffered                   // both through the page cache
	wayDirectRead                 // reads with O_DIRECT, writes through the cache
)

// floorWays are the ways every round measures, in this order.
var floorWays = [FloorWays]floorWay{wayDirect, wayBuffered, wayDirectRead}

// String names the way (Sample.FloorMethod).
func (w floorWay) String() string {
	switch w {
	case wayDirect:
		return "direct"
	case wayBuffered:
		return "buffered"
	}
	return "direct-read"
}

func (w floorWay) readsDirect() bool  { return w != wayBuffered }
func (w floorWay) writesDirect() bool { return w == wayDirect }

// floorRun is what one measurement of the floor took: its time, and how
// many writebacks it started along the way (floorWriteback).
type floorRun struct {
	wall       time.Duration
	writebacks int
}

// floorJob is one side of the floor: read the data of a file, or write n
// bytes to a new one.
type floorJob struct {
	f      *os.File
	chunks []sparse.Extent
	write  bool
}

// measureFloor measures what the hardware allows for a case: it reads the
// data extents of every file in reads at a deep queue while it writes
// writeBytes (rounded up to 4 KiB) to out, a new file, and fdatasyncs it,
// each side with O_DIRECT or through the page cache as way says (cached
// writes start their writeback as they go: floorWriteback). Reads and
// writes overlap, as in a pipelined copy. out is removed afterwards.
// keepHoles (a copy's floor-holes) writes the first file's data extents at
// their offsets instead, so that out has its holes, as an exact copy must
// (on ext4 and XFS, 100,000 small extents cost 100,000 allocations that
// one contiguous write does not pay).
//
// No way is always the fastest: on the full run's day (README) direct I/O
// was; on other days the same VM's loop filesystems moved a dense 1 GiB
// case through the page cache in 2.9 s against 4.4-4.5 s with O_DIRECT,
// slower than cp, so a floor of O_DIRECT alone was no floor; and a copy
// that reads directly and writes through the cache (localsync, ext4, a
// cold source) beat both on 2026-11-30 (0.69-0.80x the faster).
func measureFloor(ctx context.Context, reads []string, out string, writeBytes int64, way floorWay, keepHoles bool) (floorRun, error) {
	var jobs []floorJob
	defer func() {
		for _, j := range jobs {
			j.f.Close()
		}
		os.Remove(out)
	}()
	for _, p := range reads {
		m, _, err := sparse.ReadMap(ctx, p)
		if err != nil {
			return floorRun{}, err
		}
		f, err := openFloor(p, os.O_RDONLY, 0, way.readsDirect())
		if err != nil {
			return floorRun{}, err
		}
		jobs = append(jobs, floorJob{f: f, chunks: chunks(m.RoundOut(blk).Extents())})
	}
	w, err := openFloor(out, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644, way.writesDirect())
	if err != nil {
		return floorRun{}, err
	}
	jobs = append(jobs, floorJob{f: w, chunks: floorWrites(jobs[0].chunks, writeBytes, keepHoles), write: true})

	var written, writebacks atomic.Int64
	kick := func(n int64) {
		if way.writesDirect() {
			return
		}
		if t := written.Add(n); t/floorWriteback != (t-n)/floorWriteback {
			writebacks.Add(1)
			_ = rawfd.Do(w, func(fd int) error { return unix.SyncFileRange(fd, 0, 0, unix.SYNC_FILE_RANGE_WRITE) })
		}
	}

	start := time.Now()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg       sync.WaitGroup
		once     sync.Once
		firstErr error
	)
	fail := func(err error) { once.Do(func() { firstErr = err; cancel() }) }
	for _, j := range jobs {
		next := make(chan sparse.Extent)
		go func() {
			defer close(next)
			for _, c := range j.chunks {
				select {
				case next <- c:
				case <-ctx.Done():
					return
				}
			}
		}()
		for range floorQD {
			wg.Go(func() {
				buf := coldread.AlignedBuffer(floorChunk)
				for c := range next {
					b := buf[:c.Len]
					var err error
					if j.write {
						b[0], b[len(b)-1] = 1, 1
						if _, err = j.f.WriteAt(b, c.Off); err == nil {
							kick(c.Len)
						}
					} else {
						_, err = j.f.ReadAt(b, c.Off)
						if err != nil && c.End() > 0 && errors.Is(err, io.EOF) {
							err = nil // the last block past the size
						}
					}
					if err != nil {
						fail(err)
						return
					}
				}
			})
		}
	}
	wg.Wait()
	if firstErr != nil {
		return floorRun{}, firstErr
	}
	if err := w.Sync(); err != nil {
		return floorRun{}, err
	}
	return floorRun{wall: time.Since(start), writebacks: int(writebacks.Load())}, nil
}

// floorWrites is what the floor writes: writeBytes (rounded up to 4 KiB)
// from offset 0, or with keepHoles the source's data chunks (src) at their
// offsets.
func floorWrites(src []sparse.Extent, writeBytes int64, keepHoles bool) []sparse.Extent {
	if keepHoles {
		return src
	}
	n := (writeBytes + blk - 1) / blk * blk
	return chunks([]sparse.Extent{{Off: 0, Len: n}})
}

// chunks cuts extents into pieces of at most floorChunk bytes.
func chunks(ext []sparse.Extent) []sparse.Extent {
	var out []sparse.Extent
	for _, e := range ext {
		for off := e.Off; off < e.End(); off += floorChunk {
			out = append(out, sparse.Extent{Off: off, Len: min(floorChunk, e.End()-off)})
		}
	}
	return out
}
