package replica

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sparsesync/sparsesync/internal/target"
	"github.com/sparsesync/sparsesync/internal/testutil/lhdir"

	"github.com/sparsesync/sparsesync/internal/testutil/loopfs"
	"github.com/sparsesync/sparsesync/sparse"
)

func TestRevisionCounterFormat(t *testing.T) {
	b := FormatRevisionCounter(12345)
	require.Len(t, b, 4096)
	require.Equal(t, "12345", string(b[:5]))
	require.True(t, bytes.Equal(b[5:], make([]byte, 4091)))
	for _, tc := range []struct {
		in   string
		want int64
		err  bool
	}{
		{"0", 0, false},
		{"12\x00\x00", 12, false},
		{"", 0, true},
		{"\x00\x00", 0, true},
		{"-1", 0, true},
		{"12a", 0, true},
		{"1\x002", 0, true},
		{"99999999999999999999", 0, true},
	} {
		n, err := ParseRevisionCounter([]byte(tc.in))
		if tc.err {
			require.Error(t, err, "%q", tc.in)
			continue
		}
		require.NoError(t, err, "%q", tc.in)
		require.Equal(t, tc.want, n)
	}
	_, err := ParseRevisionCounter(make([]byte, 4097))
	require.Error(t, err)
}

func TestHeaderSlots(t *testing.T) {
	h := header{mode: CounterPerWrite, epoch: 7, flushSeq: 3, writeSeq: 99, gen: 5, volumeID: newID(), replicaID: newID(), bootID: newID(),
		version: headerVersion, head: fileIdent{ino: 42, btime: 1_700_000_000_123_456_789}, rcSeq: 98}
	b := make([]byte, headerFileSize)
	h.encode(b[:headerSlotSize])
	got, slot, err := decodeHeader(b)
	require.NoError(t, err)
	require.Equal(t, 0, slot)
	require.Equal(t, h, got)
	h2 := h
	h2.gen, h2.epoch = 6, 8
	h2.encode(b[headerSlotSize:])
	got, slot, err = decodeHeader(b)
	require.NoError(t, err)
	require.Equal(t, 1, slot)
	require.Equal(t, uint64(8), got.epoch)
	// A torn newer slot falls back to the older one.
	b[headerSlotSize+30] ^= 0xff
	got, slot, err = decodeHeader(b)
	require.NoError(t, err)
	require.Equal(t, 0, slot)
	require.Equal(t, uint64(7), got.epoch)
	b[20] ^= 0xff
	_, _, err = decodeHeader(b)
	require.ErrorContains(t, err, "no valid slot")
}

// model is a reference copy of the volume.
type model struct {
	mu sync.Mutex
	b  []byte
}

func TestReplicaReadWrite(t *testing.T) {
	loopfs.Run(t, 512<<20, func(t *testing.T, kind loopfs.Kind, mnt string) {
		const size = 4 << 20
		dir := filepath.Join(mnt, "r")
		r, err := Create(dir, size, nil)
		require.NoError(t, err)
		require.True(t, r.direct, "head should be open with O_DIRECT on %s", kind)
		ref := make([]byte, size)
		rng := rand.New(rand.NewPCG(1, 2))
		// Disjoint regions per goroutine so the reference is exact;
		// unaligned edges share blocks with neighbours' regions.
		var wg sync.WaitGroup
		const workers = 8
		region := int64(size / workers)
		seeds := make([]uint64, workers)
		for i := range seeds {
			seeds[i] = rng.Uint64()
		}
		var mu sync.Mutex
		for w := range workers {
			wg.Go(func() {
				rng := rand.New(rand.NewPCG(seeds[w], 9))
				base := int64(w)*region + 1 // regions start and end unaligned
				for range 300 {
					n := 1 + rng.IntN(3*BlockSize)
					off := base + rng.Int64N(region-int64(n)-2)
					p := make([]byte, n)
					for i := range p {
						p[i] = byte(rng.Uint32()) | 1
					}
					if rng.IntN(3) == 0 && n > BlockSize { // misaligned memory, aligned range
						off = roundUp(off)
						n = int(min(roundDown(int64(n)), int64(w+1)*region+1-off-2) / BlockSize * BlockSize)
						if n <= 0 {
							continue
						}
						p = append([]byte{0}, p[:n]...)[1:]
					}
					_, err := r.WriteAt(p, off)
					require.NoError(t, err)
					mu.Lock()
					copy(ref[off:], p)
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		check := func(r *Replica) {
			got := make([]byte, size)
			_, err := r.ReadAt(got, 0)
			require.NoError(t, err)
			require.True(t, bytes.Equal(ref, got), "content differs")
			// unaligned read
			got = got[:12345]
			_, err = r.ReadAt(got, 777)
			require.NoError(t, err)
			require.True(t, bytes.Equal(ref[777:777+12345], got))
		}
		check(r)
		require.NoError(t, r.Snapshot("s1", nil))
		// writes after the snapshot go to the new head; RMW copies up.
		_, err = r.WriteAt([]byte("hello"), 100)
		require.NoError(t, err)
		copy(ref[100:], "hello")
		require.NoError(t, r.Unmap(0, size)) // no-op with a snapshot below
		check(r)
		info, err := r.Info()
		require.NoError(t, err)
		require.Equal(t, []string{"volume-head-001.img", "volume-snap-s1.img"}, info.Chain)
		require.Equal(t, int64(BlockSize), info.HeadAllocatedBytes)
		require.NoError(t, r.Close())
		r, err = Open(dir, nil)
		require.NoError(t, err)
		check(r)
		require.NoError(t, r.Close())

		// The read-only chain reader merges the same content.
		c, err := OpenChain(dir)
		require.NoError(t, err)
		got := make([]byte, size)
		_, err = c.ReadAt(got, 0)
		require.NoError(t, err)
		require.True(t, bytes.Equal(ref, got))
		m, err := c.Map(t.Context())
		require.NoError(t, err)
		for blk := int64(0); blk < size/BlockSize; blk++ {
			if !m.Contains(blk * BlockSize) {
				require.True(t, sparse.IsZero(ref[blk*BlockSize:(blk+1)*BlockSize]), "block %d has data outside the map", blk)
			}
		}
		require.NoError(t, c.Close())
	})
}

func TestUnmapPunches(t *testing.T) {
	dir := t.TempDir()
	r, err := Create(dir, 1<<20, nil)
	require.NoError(t, err)
	p := bytes.Repeat([]byte{7}, 1<<20)
	_, err = r.WriteAt(p, 0)
	require.NoError(t, err)
	require.NoError(t, r.Unmap(100, 3*BlockSize)) // interior: blocks 1 and 2
	require.Equal(t, int64(2), r.Revision())
	got := make([]byte, 4*BlockSize)
	_, err = r.ReadAt(got, 0)
	require.NoError(t, err)
	require.True(t, bytes.Equal(got[:BlockSize], p[:BlockSize]))
	require.True(t, bytes.Equal(got[BlockSize:3*BlockSize], make([]byte, 2*BlockSize)))
	require.True(t, bytes.Equal(got[3*BlockSize:], p[:BlockSize]))
	info, err := r.Info()
	require.NoError(t, err)
	require.Equal(t, int64(1<<20-2*BlockSize), info.HeadAllocatedBytes)
	require.NoError(t, r.Close())
}

func TestCounterExact(t *testing.T) {
	// 64 writers at once, a tenth of the writes unaligned: 16,000 writes show
	// the count exact as well as 64,000 did, in a quarter of the time.
	const writesPerWorker = 250
	for _, mode := range []CounterMode{CounterOn, CounterPerWrite} {
		t.Run(mode.String(), func(t *testing.T) {
			dir := t.TempDir()
			r, err := Create(dir, 64<<20, &Options{Counter: mode})
			require.NoError(t, err)
			var wg sync.WaitGroup
			for w := range 64 {
				wg.Go(func() {
					b := alignedBuf(BlockSize)
					for i := range writesPerWorker {
						off := int64((w*writesPerWorker+i)%(64<<20/BlockSize)) * BlockSize
						if i%10 == 0 {
							_, err := r.WriteAt(b[:100], off+1) // unaligned
							require.NoError(t, err)
							continue
						}
						_, err := r.WriteAt(b, off)
						require.NoError(t, err)
					}
					if w%8 == 0 {
						require.NoError(t, r.Flush())
					}
				})
			}
			wg.Wait()
			require.Equal(t, int64(64*writesPerWorker), r.Revision())
			require.NoError(t, r.Close())
			n, err := readRevisionCounter(filepath.Join(dir, RevisionCounterFile))
			require.NoError(t, err)
			require.Equal(t, int64(64*writesPerWorker), n)
			r, err = Open(dir, nil)
			require.NoError(t, err)
			require.Equal(t, int64(64*writesPerWorker), r.Revision())
			require.Equal(t, mode, r.CounterMode())
			require.NoError(t, r.Close())
		})
	}
}

func TestCounterFaultLatches(t *testing.T) {
	dir := t.TempDir()
	var fail bool
	var mu sync.Mutex
	injected := errors.New("injected counter write failure")
	r, err := Create(dir, 1<<20, &Options{faults: target.NewFaults(target.Fault{Op: target.OpSidecarWrite, Path: RevisionCounterFile, When: func() bool {
		mu.Lock()
		defer mu.Unlock()
		return fail
	}, Err: injected})})
	require.NoError(t, err)
	b := alignedBuf(BlockSize)
	_, err = r.WriteAt(b, 0)
	require.NoError(t, err)
	mu.Lock()
	fail = true
	mu.Unlock()
	_, err = r.WriteAt(b, BlockSize)
	require.ErrorIs(t, err, injected)
	require.ErrorIs(t, err, ErrLatched)
	mu.Lock()
	fail = false // the fault is gone, but the replica stays failed
	mu.Unlock()
	_, err = r.WriteAt(b, 2*BlockSize)
	require.ErrorIs(t, err, ErrLatched)
	require.ErrorIs(t, r.Unmap(0, BlockSize), ErrLatched)
	require.ErrorIs(t, r.Flush(), ErrLatched)
	_, err = r.ReadAt(b, 0)
	require.ErrorIs(t, err, ErrLatched)
	require.ErrorIs(t, r.Snapshot("x", nil), ErrLatched)
	require.Equal(t, int64(1), r.Revision(), "the failed write must not be counted")
	require.ErrorIs(t, r.Close(), ErrLatched)
	// Nothing after the failure was persisted as clean.
	info, err := Inspect(dir, nil)
	require.NoError(t, err)
	require.Equal(t, int64(1), *info.Revision)
}

// A header write that fails behind a flush latches the replica: the next
// operations fail and the header keeps the last count it recorded.
func TestHeaderWriteFaultLatches(t *testing.T) {
	dir := t.TempDir()
	var fail atomic.Bool
	injected := errors.New("injected header write failure")
	r, err := Create(dir, 1<<20, &Options{faults: target.NewFaults(target.Fault{Op: target.OpSidecarWrite, Path: HeaderFile, When: fail.Load, Err: injected})})
	require.NoError(t, err)
	b := alignedBuf(BlockSize)
	_, err = r.WriteAt(b, 0)
	require.NoError(t, err)
	require.NoError(t, r.Flush())
	require.Eventually(t, func() bool {
		h, _, err := readHeader(filepath.Join(dir, HeaderFile))
		return err == nil && h.writeSeq == 1
	}, 5*time.Second, time.Millisecond)
	fail.Store(true)
	_, err = r.WriteAt(b, BlockSize)
	require.NoError(t, err)
	require.NoError(t, r.Flush(), "the data sync itself succeeded")
	require.Eventually(t, func() bool { return r.Err() != nil }, 5*time.Second, time.Millisecond)
	require.ErrorIs(t, r.Err(), injected)
	_, err = r.WriteAt(b, 2*BlockSize)
	require.ErrorIs(t, err, ErrLatched)
	require.ErrorIs(t, r.Flush(), ErrLatched)
	require.ErrorIs(t, r.Close(), ErrLatched)
	h, _, err := readHeader(filepath.Join(dir, HeaderFile))
	require.NoError(t, err)
	require.Equal(t, uint64(1), h.writeSeq)
	require.False(t, h.clean)
}

func TestLonghornDirectory(t *testing.T) {
	dir := t.TempDir()
	lhdir.WriteDir(t, dir, 42, map[int64]byte{0: 'h', 8192: 'H'}, map[int64]byte{0: 's', 4096: 'S'})
	info, err := Inspect(dir, nil)
	require.NoError(t, err)
	require.Equal(t, int64(1<<20), info.Size)
	require.Equal(t, "volume-head-002.img", info.Head)
	require.True(t, info.CounterEnabled)
	require.False(t, info.HasHeader)
	require.Equal(t, int64(42), *info.Revision)
	require.Equal(t, []string{"volume-head-002.img", "volume-snap-c8e2b5ce-3a5a-4c5f-a3f0-5c2f1b9d7e61.img"}, info.Chain)
	require.Equal(t, int64(2*BlockSize), info.HeadAllocatedBytes)

	r, err := Open(dir, nil)
	require.NoError(t, err)
	got := make([]byte, 4*BlockSize)
	_, err = r.ReadAt(got, 0)
	require.NoError(t, err)
	for blk, want := range []byte{'h', 'S', 'H', 0} {
		require.Equal(t, bytes.Repeat([]byte{want}, BlockSize), got[blk*BlockSize:(blk+1)*BlockSize], "block %d", blk)
	}
	_, err = r.WriteAt([]byte("x"), BlockSize) // RMW copies the snapshot block up
	require.NoError(t, err)
	require.NoError(t, r.Snapshot("after", nil))
	require.NoError(t, r.Close())

	// What Longhorn reads back: volume.meta fields, the chain, the counter.
	var vm map[string]any
	b, err := os.ReadFile(filepath.Join(dir, VolumeMetaFile))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &vm))
	require.Equal(t, "volume-head-003.img", vm["Head"])
	require.Equal(t, "volume-snap-after.img", vm["Parent"])
	require.Equal(t, false, vm["Dirty"])
	require.Equal(t, float64(512), vm["SectorSize"])
	dm, err := ReadDiskMeta(dir, "volume-snap-after.img")
	require.NoError(t, err)
	require.Equal(t, "volume-snap-c8e2b5ce-3a5a-4c5f-a3f0-5c2f1b9d7e61.img", dm.Parent)
	n, err := readRevisionCounter(filepath.Join(dir, RevisionCounterFile))
	require.NoError(t, err)
	require.Equal(t, int64(43), n)
	_, err = os.Stat(filepath.Join(dir, "volume-head-002.img"))
	require.ErrorIs(t, err, os.ErrNotExist)
	chain, _, err := Chain(dir)
	require.NoError(t, err)
	require.Equal(t, []string{"volume-head-003.img", "volume-snap-after.img", "volume-snap-c8e2b5ce-3a5a-4c5f-a3f0-5c2f1b9d7e61.img"}, chain)
	r, err = Open(dir, nil)
	require.NoError(t, err)
	_, err = r.ReadAt(got, 0)
	require.NoError(t, err)
	want := bytes.Repeat([]byte{'S'}, BlockSize)
	want[0] = 'x'
	require.Equal(t, want, got[BlockSize:2*BlockSize])
	require.NoError(t, r.Close())

	c, err := OpenChain(dir)
	require.NoError(t, err)
	defer c.Close()
	m, err := c.Map(t.Context())
	require.NoError(t, err)
	require.Equal(t, []sparse.Extent{{Off: 0, Len: 3 * BlockSize}}, m.Extents())
	p := make([]byte, 10)
	k, err := c.ReadAt(p, BlockSize-5) // spans two layers
	require.NoError(t, err)
	require.Equal(t, "hhhhhxSSSS", string(p[:k]))
	k, err = c.ReadAt(p, 1<<20-4)
	require.ErrorIs(t, err, io.EOF)
	require.Equal(t, 4, k)
}

func TestFlushGroupCommit(t *testing.T) {
	dir := t.TempDir()
	var syncs atomic.Int64
	r, err := Create(dir, 4<<20, &Options{faults: target.NewFaults(target.Fault{Op: target.OpFdatasync, When: func() bool {
		syncs.Add(1)
		return false
	}})})
	require.NoError(t, err)
	var wg sync.WaitGroup
	const flushers = 16
	for w := range flushers {
		wg.Go(func() {
			b := alignedBuf(BlockSize)
			for i := range 20 {
				_, err := r.WriteAt(b, int64(w*20+i)*BlockSize)
				require.NoError(t, err)
				seen := uint64(r.Revision())
				require.NoError(t, r.Flush())
				// The flush's data sync covered at least every write
				// completed before it was called, and the header never
				// records more than a data sync has covered.
				h, ok, err := readHeader(filepath.Join(dir, HeaderFile))
				require.NoError(t, err)
				require.True(t, ok)
				durable := r.durable.Load()
				require.GreaterOrEqual(t, durable, seen)
				require.LessOrEqual(t, h.writeSeq, durable)
			}
		})
	}
	wg.Wait()
	// The header writer catches up with the last flush (the limit only
	// guards against a hang; nothing here is timed).
	require.Eventually(t, func() bool {
		h, _, err := readHeader(filepath.Join(dir, HeaderFile))
		return err == nil && h.writeSeq == flushers*20 && !h.clean
	}, time.Minute, time.Millisecond)
	t.Logf("%d flush calls, %d syncs", flushers*20, syncs.Load())
	require.NoError(t, r.Close())
}

// TestFlushGroupCommitShares: flushes called while a sync is in flight
// share one later sync. The first flush's sync is held in the fault hook
// until every other flusher is parked waiting for it (seen in the
// goroutine stacks, not guessed with a sleep); once released, the
// waiters need exactly one more sync between them, however the scheduler
// runs them.
func TestFlushGroupCommitShares(t *testing.T) {
	const flushers = 16
	var counting atomic.Bool
	var syncs atomic.Int64
	held, release := make(chan struct{}), make(chan struct{})
	r, err := Create(t.TempDir(), 4<<20, &Options{faults: target.NewFaults(target.Fault{Op: target.OpFdatasync, When: func() bool {
		if counting.Load() && syncs.Add(1) == 1 {
			close(held)
			<-release
		}
		return false
	}})})
	require.NoError(t, err)
	b := alignedBuf(BlockSize)
	counting.Store(true)
	var wg sync.WaitGroup
	flush := func(w int) {
		wg.Go(func() {
			_, err := r.WriteAt(b, int64(w)*BlockSize)
			require.NoError(t, err)
			require.NoError(t, r.Flush())
		})
	}
	flush(0)
	<-held
	for w := 1; w < flushers; w++ {
		flush(w)
	}
	for deadline := time.Now().Add(time.Minute); parkedFlushes() < flushers-1; runtime.Gosched() {
		require.True(t, time.Now().Before(deadline), "only %d of %d flushers parked", parkedFlushes(), flushers-1)
	}
	close(release)
	wg.Wait()
	require.Equal(t, int64(2), syncs.Load(), "the held sync and one shared by the %d flushes that waited for it", flushers-1)
	require.NoError(t, r.Close())
}

// parkedFlushes counts goroutines blocked in Flush's wait for a sync.
func parkedFlushes() int {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	n := 0
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "sync.(*Cond).Wait") && strings.Contains(g, "replica.(*Replica).Flush") {
			n++
		}
	}
	return n
}

func TestSyncFaultLatches(t *testing.T) {
	for _, mode := range []CounterMode{CounterOff, CounterOn, CounterPerWrite} {
		t.Run(mode.String(), func(t *testing.T) {
			var fail atomic.Bool
			injected := errors.New("injected fdatasync failure")
			r, err := Create(t.TempDir(), 1<<20, &Options{Counter: mode, faults: target.NewFaults(
				target.Fault{Op: target.OpFdatasync, When: fail.Load, Err: injected},
				target.Fault{Op: target.OpSidecarWrite, Path: RevisionCounterFile, When: fail.Load, Err: injected})})
			require.NoError(t, err)
			b := alignedBuf(BlockSize)
			_, err = r.WriteAt(b, 0)
			require.NoError(t, err)
			fail.Store(true)
			if mode.Enabled() {
				_, err = r.WriteAt(b, 0)
				require.ErrorIs(t, err, injected, "the counter update fails the write")
			} else {
				require.ErrorIs(t, r.Flush(), injected)
			}
			fail.Store(false)
			_, err = r.WriteAt(b, 0)
			require.ErrorIs(t, err, ErrLatched)
			require.ErrorIs(t, r.Flush(), ErrLatched)
			require.ErrorIs(t, r.Close(), ErrLatched)
		})
	}
}

func TestWriteFileAtomic(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, writeFileAtomic(dir, "f", []byte("one")))
	fi1, err := os.Stat(filepath.Join(dir, "f"))
	require.NoError(t, err)
	require.NoError(t, writeFileAtomic(dir, "f", []byte("two")))
	b, err := os.ReadFile(filepath.Join(dir, "f"))
	require.NoError(t, err)
	require.Equal(t, "two", string(b))
	fi2, err := os.Stat(filepath.Join(dir, "f"))
	require.NoError(t, err)
	require.False(t, os.SameFile(fi1, fi2), "replaced by rename, not rewritten in place")
	// A failing rename (the target is a non-empty directory) leaves the
	// target alone and no temporary behind.
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "d", "x"), 0o700))
	require.Error(t, writeFileAtomic(dir, "d", []byte("three")))
	_, err = os.Stat(filepath.Join(dir, "d", "x"))
	require.NoError(t, err)
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	for _, e := range entries {
		require.False(t, strings.HasSuffix(e.Name(), ".tmp"), e.Name())
	}
}

func TestOneWriterPerDirectory(t *testing.T) {
	dir := t.TempDir()
	r, err := Create(dir, 1<<20, nil)
	require.NoError(t, err)
	_, err = Open(dir, nil)
	require.ErrorIs(t, err, ErrBusy)
	// Read-only inspection and the check still work.
	_, err = Inspect(dir, nil)
	require.NoError(t, err)
	require.NoError(t, r.Close())
	r, err = Open(dir, nil)
	require.NoError(t, err)
	require.NoError(t, r.Close())
}

func TestCreateFailureLeavesNothing(t *testing.T) {
	root := t.TempDir()
	// The third directory cannot be created (a file is in the way).
	require.NoError(t, os.WriteFile(filepath.Join(root, "r2"), nil, 0o600))
	dirs := []string{filepath.Join(root, "r0"), filepath.Join(root, "r1"), filepath.Join(root, "r2", "x")}
	_, err := CreateVolume(dirs, 1<<20, nil)
	require.Error(t, err)
	for _, d := range dirs[:2] {
		_, err := os.Stat(d)
		require.ErrorIs(t, err, os.ErrNotExist, "%s left behind", d)
	}
	// An existing replica is refused and left as it was.
	r, err := Create(dirs[0], 1<<20, nil)
	require.NoError(t, err)
	require.NoError(t, r.Close())
	_, err = Create(dirs[0], 1<<20, nil)
	require.ErrorIs(t, err, ErrExists)
	_, err = Inspect(dirs[0], nil)
	require.NoError(t, err)
	_, err = Create(filepath.Join(root, "bad"), 1<<20, &Options{Counter: 9})
	require.Error(t, err)
	_, err = os.Stat(filepath.Join(root, "bad"))
	require.ErrorIs(t, err, os.ErrNotExist)
}

// Unaligned writes to disjoint bytes of the same 4 KiB blocks, from many
// goroutines: the read-modify-write of a block must not lose a neighbour's
// bytes (the per-block lock), and aligned writes of other blocks proceed.
func TestUnalignedSameBlockNoLostUpdate(t *testing.T) {
	r, err := Create(t.TempDir(), 1<<20, nil)
	require.NoError(t, err)
	const writers, rounds = 8, 300
	var wg sync.WaitGroup
	for g := range writers {
		wg.Go(func() {
			p := make([]byte, 100)
			for i := range rounds {
				for j := range p {
					p[j] = byte(g*31 + i)
				}
				// Bytes [g*512+1, g*512+101) of blocks 0 and 1: one write
				// inside a block, one straddling blocks 0 and 1 for g=7.
				_, err := r.WriteAt(p, int64(g*512+1))
				require.NoError(t, err)
				_, err = r.WriteAt(p, BlockSize+int64(g*512+1))
				require.NoError(t, err)
			}
		})
	}
	wg.Go(func() { // aligned writes to other blocks meanwhile
		b := alignedBuf(BlockSize)
		for i := range rounds {
			_, err := r.WriteAt(b, int64(2+i%100)*BlockSize)
			require.NoError(t, err)
		}
	})
	wg.Wait()
	got := make([]byte, 2*BlockSize)
	_, err = r.ReadAt(got, 0)
	require.NoError(t, err)
	for g := range writers {
		want := bytes.Repeat([]byte{byte(g*31 + rounds - 1)}, 100)
		require.Equal(t, want, got[g*512+1:g*512+101], "writer %d, block 0", g)
		require.Equal(t, want, got[BlockSize+g*512+1:BlockSize+g*512+101], "writer %d, block 1", g)
	}
	require.Equal(t, int64(writers*rounds*2+rounds), r.Revision())
	require.NoError(t, r.Close())
}
