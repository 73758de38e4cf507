package localsync

// One kernel copy into the destination at a time, its source read ahead.
//
// Every filesystem we copy to (ext4, XFS, btrfs) takes the inode's lock
// exclusively for a buffered write, so copy_file_range calls into one file
// never write in parallel: with eight workers the seven that wait spin on
// the lock (rwsem_spin_on_owner under ext4_buffered_write_iter in a
// system-wide profile), and that spin was most of a copy's CPU above cp's.
// So a worker first asks for its piece's source to be read
// (POSIX_FADV_WILLNEED, which queues the reads and returns), then waits
// for the gate, and copies from the page cache: the reads stay eight deep,
// the writes take turns, and the waiting workers sleep.
//
// Measured on ext4 in a direct-I/O loop, caches dropped, 10 interleaved
// rounds against cp --sparse=always then sync -f (docs/benchmarks.md, "One
// writer at a time"): the machine's busy CPU went from 1.56x to 1.05x cp's
// on 2 GiB with 10% data, 1.13x to 0.86x on an ext4 image of /usr/share,
// 0.87x to 0.71x on 1 GiB dense; wall time the same or lower (0.71-0.98x
// cp's).
//
// Pieces shorter than gateMin keep today's path: their reads are small and
// latency-bound, and serialising them would serialise the reads too.

// gateMin is the shortest copy piece that is read ahead and gated.
const gateMin = batchExtent

// enter waits for the destination's write gate; the returned func leaves
// it. A cancelled copy does not wait.
func (e *engine) enter() (leave func(), err error) {
	select {
	case e.gate <- struct{}{}:
		return func() { <-e.gate }, nil
	case <-e.ctx.Done():
		return func() {}, e.ctx.Err()
	}
}
