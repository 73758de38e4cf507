// Package tcpsync synchronises a sparse file between two machines over one
// TCP connection, sending only the data that differs and proving the result
// identical.
//
// A Server (sparsesync serve) holds files beneath a root. A client pushes a
// Source into it (Push, PushFile) or pulls a file out of it (Pull). In both
// directions one side is the sender (it reads the source) and the other the
// receiver (the only writer of the target).
//
// # Protocol
//
// The protocol's bytes (frame types and limits, header, HELLO, WINDOW
// bodies, DATA codecs, tags, error codes) are package internal/wire; this
// package holds the sessions that speak it.
//
// Frames have an 8-byte header (type, flags, reserved, length) and bounded
// bodies: at most 1 MiB + 64 bytes for DATA, 64 KiB otherwise, 4 KiB in
// total before authentication. Limits are checked before anything is
// allocated.
//
//	client → server  HELLO (magic, version, features, nonce)
//	server → client  HELLO
//	client → server  AUTH  HMAC-SHA256(token, "client" ‖ SHA-256(hellos ‖ TLS exporter))
//	server → client  AUTH  the same with "server": mutual authentication
//	then every frame in both directions carries tags (internal/wire): AES-GMAC,
//	or HMAC-SHA256 with a peer without wire.FeatGMAC:
//	header ‖ 8-byte header tag ‖ body ‖ 16-byte tag, keyed per direction
//	from the token and the transcript, over a sequence number
//	client → server  OPEN  push|pull, flags, block size, relative path
//	server → client  OPENED or ERROR
//	sender → receiver SRCINFO (size, block size, identity[, data bytes])
//	receiver → sender DSTINFO (size, quick check, resume offset)
//	with wire.FeatWindows in both HELLOs, for each window [lo, hi) of the file:
//	    sender → receiver   WINDOW(lo, hi, its extents there)
//	    receiver → sender   WINDOW(lo, hi' <= hi, its own extents there)
//	    both: newPlan over the window's pieces; the window's chunks (below)
//	    the next window once every chunk of this one is settled
//	without (an older peer): EXTENTS (sparse encoding) after each INFO
//
// With windows (window.go; the WINDOW body is internal/wire's) a session holds one window of each map (at most
// 32 KiB of encoded map each) whatever the extent count: a window closes at
// the next block boundary once its extents' encoding passes 16 KiB, and the
// receiver may close it sooner where its own map is denser. Without them a
// map crosses whole as EXTENTS frames of 64 KiB, each but the last full; its
// length is bounded by the receiving side's session memory budget
// (Server.MaxSessionMemory: 148 bytes an extent, about 2 million extents by
// default) when both HELLOs announce wire.FeatWideMaps; a peer without it takes
// at most 2^20 extents, and a longer map is refused before it is sent
// (ErrTooManyExtents, never retried).
//
// Both sides then derive the same plan from the two maps, or a window's
// (internal/destplan, the rule localsync follows too, at the block size): the source's data
// blocks (4 KiB by default) are cut into chunks of 4096 blocks; a block is
// "compared" when the destination also holds data there at the same block
// length, otherwise it is sent, and only its source data is written. The
// receiver punches destination data over source holes itself, exactly, with
// its hidden allocation and the old last page of a target grown from an
// unaligned size.
//
//	for each chunk k (sender, pipelined, up to 8 chunks awaiting answers):
//	    DATA/ZERO for blocks the receiver lacks (zero blocks as markers)
//	    SEGEND(k, xxhash of the seeded block hashes of compared blocks, digest)
//	receiver: equal sum → RESULT(k); else HASHES(k, 8 bytes per block)
//	sender on HASHES: DATA/ZERO for differing blocks, then FIXEND(k)
//	sender: DONE(size, digest)      receiver: fdatasync, DONEACK
//	receiver, while it reads back (ReadBack): PROGRESS(bytes read) every
//	second at most, if the sender's HELLO announced it (wire.FeatKeepalive)
//
// Block hashes are xxhash64 seeded per session from the authentication
// transcript, so a writer of the data cannot craft collisions that hide a
// change. The digest is an order-free sum over (offset, length, xxhash64
// keyed per session) of every non-zero block of the result; both sides compute it
// from the reads they already do, per chunk and for the file, and the
// receiver refuses to settle a chunk whose digest differs.
//
// # Resume, atomic, quick check
//
// The receiver keeps a sidecar "<target>.tcpsync" that says "incomplete"
// from before the first write until verification, and records the offset
// below which every chunk is verified and durable (fdatasync every 256 MiB
// or 5 s, and when a session fails or the server shuts down), with the
// target's identity (device, inode, size, ctime) after that fdatasync. A
// retry with the same source identity skips those chunks if the target is
// still what the checkpoint recorded; otherwise (or with FullCompare) every
// chunk is compared. After a verified sync the sidecar says "complete" with
// the source identity and the target's identity: the next sync of the same
// source version ends after one round trip (the quick check). With Atomic
// the receiver writes a temporary file (created O_EXCL under a random name,
// seeded from the target with copy_file_range), fsyncs it, renames it over
// the target and fsyncs the directory. Writes, holes, sizing, syncs and the
// temporary file go through internal/target, as localsync's do.
//
// # Storage verification and a changing source
//
// With ReadBack (the default for Atomic), the receiver reads the target's
// data back after the final fdatasync, bypassing the page cache (its own
// extents within the source's data, or with windows all of its own extents,
// a window at a time: the bytes read are bounded by what it holds, not by
// what the peer claimed), and checks the whole
// file against the sender's digest, which then covers the
// chunks a resume skipped too; a mismatch moves the checkpoint back to the
// start and fails with ErrVerify. A FileSource's identity is
// taken when a sync starts (once the filesystem clock is past its last
// change) and compared after the last read: a source written meanwhile
// fails the sync with ErrSourceChanged.
//
// # Security
//
// Every byte from the network is hostile: remote names are validated
// (ValidateName), resolved beneath an os.Root with no symlink on the path,
// the last component opened with openat(O_NOFOLLOW) (os.Root alone would
// follow a symlink inside the root), and the file must be regular with a
// single link (a hard link may name a file outside the root); ranges are
// overflow-checked against the size; the peer never chooses memory, threads
// or timeouts. A peer's claims cost nothing: plans are computed per chunk,
// map extent counts are checked before buffering, and sessions draw from
// memory budgets (limits.go) by the bytes that arrived, never by a claimed
// count, with a share per peer address. Connections are pending until OPEN, with
// their own caps per address and in all (the oldest pending connection of
// the busiest address makes room), separate from session caps (accept.go),
// all lowered to fit a low descriptor limit (Server.fitDescriptors);
// handshake and OPEN have a deadline from accept, and a session that moves
// less than 64 KiB per idle timeout ends (stall.go). Errors go back to the
// peer as a code and a sanitized message.
package tcpsync
