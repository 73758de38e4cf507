package tcpsync

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"

	"github.com/sparsesync/sparsesync/sparse"
)

// ReadBack selects the storage check a receiver makes before it reports a
// sync verified.
//
// Without it, the end-to-end digest proves the transfer: it is computed
// from the bytes the receiver received or read for its compare, chunk by
// chunk. With it, after the final fdatasync the receiver reads the
// target's data back (the extents it holds within the source's data
// blocks: what it wrote or compared, never a range the peer only
// described; holes read as zeros, which the digest skips), bypassing the
// page cache (O_DIRECT, or a buffered read after POSIX_FADV_DONTNEED drops
// the file's clean pages), and checks the stored bytes against the
// source's digest over the whole file, whatever the resume history (the
// sender also digests the chunks a resume skipped). A
// mismatch ends the sync with ErrVerify, leaves an in-place target marked
// incomplete with its checkpoint back at the start (an atomic target is not
// replaced), and the client's full-compare retry repairs it.
//
// Its String is auto, on or off (the CLI's --read-back values).
type ReadBack uint8

//go:generate go run golang.org/x/tools/cmd/stringer@v0.52.0 -type=ReadBack -linecomment

const (
	// ReadBackAuto reads back atomic syncs only (the default).
	ReadBackAuto ReadBack = iota // auto
	// ReadBackOn reads back every sync (replica.Rebuild turns it on when
	// its options leave ReadBackAuto).
	ReadBackOn // on
	// ReadBackOff never reads back.
	ReadBackOff // off
)

// ParseReadBack parses auto, on or off ("" is auto).
func ParseReadBack(s string) (ReadBack, error) {
	if s == "" {
		return ReadBackAuto, nil
	}
	for r := ReadBackAuto; r <= ReadBackOff; r++ {
		if strings.EqualFold(s, r.String()) {
			return r, nil
		}
	}
	return 0, fmt.Errorf("unknown read-back mode %q (want auto, on or off)", s)
}

// openReadBack asks the peer for a read-back sync (OPEN flag): the sender
// then digests the whole file, the receiver reads the target back.
const openReadBack = 1 << 7

// on reports whether a sync with atomic set reads back.
func (r ReadBack) on(atomic bool) bool {
	return r == ReadBackOn || (r == ReadBackAuto && atomic)
}

// readBackWorkers is how many reads the read-back keeps in flight (each
// with its own O_DIRECT descriptor and 4 MiB buffer).
const readBackWorkers = 2

// readJob is one read of the read-back: up to readBackSize bytes of what
// it reads.
type readJob struct{ off, n int64 }

// readBackDigest computes the digest of the file as stored over the
// ranges m (whole blocks of bs), bypassing the page cache where the system
// allows (uncachedReader), with readBackWorkers reads in flight; each read
// of n bytes is reported to onRead. The jobs are cut from the extents as
// the workers take them, so memory does not grow with the file.
// readBackDigest reads m's blocks of f and returns their digest; onRead is
// told of each read (and may wait: the budget), an error ends it.
func readBackDigest(ctx context.Context, f *os.File, m sparse.Map, bs int64, seed uint64, onRead func(n int64) error) (digest, error) {
	ext := m.Extents()
	var mu sync.Mutex
	var ei int
	var off int64
	if len(ext) > 0 {
		off = ext[0].Off
	}
	next := func() (readJob, bool) {
		mu.Lock()
		defer mu.Unlock()
		for ei < len(ext) && off >= ext[ei].End() {
			ei++
			if ei < len(ext) {
				off = ext[ei].Off
			}
		}
		if ei >= len(ext) {
			return readJob{}, false
		}
		j := readJob{off, min(ext[ei].End()-off, readBackSize)}
		off += j.n
		return j, true
	}
	parts := make([]digest, readBackWorkers)
	g, gctx := newGroup(ctx)
	for w := range parts {
		g.Go(func() error {
			rd, err := newUncachedReader(f)
			if err != nil {
				return err
			}
			defer rd.close()
			dk := newDigestKey(seed)
			for {
				j, ok := next()
				if !ok {
					return nil
				}
				if err := gctx.Err(); err != nil {
					return context.Cause(gctx)
				}
				b, err := rd.read(j.off, j.n)
				if err != nil {
					return err
				}
				if err := onRead(j.n); err != nil {
					return err
				}
				for q := int64(0); q < j.n; q += bs {
					if blk := b[q:min(q+bs, j.n)]; !sparse.IsZero(blk) {
						parts[w].addBlock(dk, j.off+q, blk)
					}
				}
			}
		})
	}
	if err := g.Wait(); err != nil {
		return digest{}, err
	}
	var total digest
	for _, d := range parts {
		total.add(d)
	}
	return total, nil
}
