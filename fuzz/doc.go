// Package fuzz drives generated file layouts through every sync path of
// sparsesync and checks each result against oracles that do not share our
// code: a plain read of the bytes, a plain SEEK_DATA/SEEK_HOLE loop, st_blocks
// and the rules the documentation (README.md, docs/) states.
//
// The package has no API; it is its tests. Each fuzz target decodes the
// fuzzer's bytes into a case:
//
//	size                      # 0 .. 2 MiB, unaligned sizes included
//	source layout             # data, all-zero data, unwritten preallocations,
//	                          # punched holes, ranges reflinked from a third file
//	destination layout        # optional: an existing destination with its own
//	                          # data and its own sharing with the third file
//	change script             # optional: writes, punches, truncates, clones
//	                          # applied to the source between two syncs
//	pick                      # optional last byte: the one option set a
//	                          # fuzzing run (-fuzz) tries; the seed corpus
//	                          # tries them all
//
// and runs it through one family of paths:
//
//	FuzzLocal    localsync.Copy: every method, 4 KiB and 64 KiB blocks,
//	             atomic and in place, DetectZeros on and off
//	FuzzTCP      tcpsync push and pull over an in-process server on
//	             127.0.0.1, full sync, unchanged re-sync and re-sync after
//	             the change script, every compression
//	FuzzReplica  replica writes of the layout (a snapshot between layout and
//	             change script), then Export and a push of the chain
//
// after which, for every result:
//
//	bytes        equal to the source's, read plainly (or to an in-memory
//	             model of the writes for replicas)
//	size         equal
//	holes        every hole of the source is a hole of the result
//	data         localsync without DetectZeros keeps every data range a data
//	             range (all-zero data is data unless DetectZeros)
//	allocation   st_blocks covers no more than the result's data, plus a
//	             small allowance for metadata blocks
//	no-op        an unchanged in-place re-sync writes nothing: the result's
//	             mtime (set to a sentinel first) does not move and the
//	             stats count no written byte
//
// The targets run on tmpfs by default. As root with SPARSESYNC_HEAVY=1 (as
// .ci/run sets) the seed corpus also runs on ext4, XFS (reflink) and btrfs
// loop filesystems (internal/testutil/loopfs), where
// clones and FIEMAP sharing are real; when fuzzing, SPARSESYNC_FUZZ_FS picks
// the filesystem (tmpfs, ext4, xfs or btrfs).
package fuzz
