// Package disks is a node agent that balances replica directories between
// the disks of one node under disk pressure: it measures the disks, lets
// scheduler/longhorn decide (the same disk-pressure rule `plan rebalance`
// applies to a whole cluster) and moves replicas with rebuild.Rebuild,
// verified and crash-safe. The planners stay pure; this package is the
// executor on top of them and of package replica.
//
// # A pass
//
//	for each disk: statfs → maximum and available bytes
//	for each subdirectory (not starting with '.'): replica.Inspect →
//	    volume (from the Longhorn name <volume>-<8 chars>), size, and the
//	    bytes its files occupy
//	model: one node, ready; each disk with its reserve and scheduling
//	    switch; each volume healthy with the replicas this node holds;
//	    auto-balance best-effort, pressure threshold T, disk anti-affinity
//	    soft or hard, node anti-affinity soft (all replicas are on this node)
//	longhorn.Rebalance(model) → its disk-pressure moves: on each pressured
//	    disk (floor(max(0, available − reserved) × 100 / max) < 100 − T) the
//	    first replica by name goes to another disk that passes every
//	    placement rule and stays below the threshold once it is there
//	execute the moves in plan order, one at a time (Config.MaxConcurrentMoves
//	allows more, as Longhorn's concurrent-replica-rebuild-per-node-limit)
//
// No rule is repeated here: a move the agent makes is always one the
// planner made. A replica whose directory lock is held (a writer has it
// open) is skipped, not waited on.
//
// # A move, and why it is safe
//
// Replica R moves from disk A to disk B. Each move has an id ID = R.<8
// hex>. The record and the copy being made are on the target disk B, in
// B/.sparsesync-disks/ID: B has room by construction (the planner only
// picks a target the replica fits on). A may be full to the last block,
// which is when a move is most needed, so the move must not need a byte
// of it: its only change on A is a rename of the source into
// A/.sparsesync-disks, a directory New makes on every disk and keeps
// (empty between moves), so it exists before a disk fills up and has room
// for one more name. Names starting with a dot are never taken for
// replica directories, by this agent or by Longhorn.
//
//	flock A/R                       the replica lock writers take: a writer
//	                                has it → skip; we hold it to the end
//	write B/.sparsesync-disks/ID/intent.json {phase: copy}, fsync file+dir
//	rebuild.Rebuild(A/R → B/.sparsesync-disks/ID/new, SourceLocked)
//	                                reflink, copy_file_range or read/write;
//	                                every file compared and fdatasynced
//	replica.Inspect both: same size, chain, revision, epoch
//	rename A/R → A/.sparsesync-disks/retired.ID, fsync both
//	                                no writer can reach the source any more
//	rewrite intent.json {phase: commit}, fsync    ← the commit point
//	rename B/.sparsesync-disks/ID/new → B/R, fsync
//	remove A/.sparsesync-disks/retired.ID, then the record
//
// At every instant the replica has exactly one authoritative directory:
// the source until the record says commit, the copy after. Only one of
// A/R and B/R ever exists (between the retirement and the placement,
// neither: the replica is then in a hidden directory, under its lock until
// a crash and under the record after one).
//
// A cleanup that fails after the commit (removing the retired source or
// the record) does not undo the move: the replica lives on B, the move is
// reported done (move-done with a Reason, PassResult.CleanupPending), and
// the next start finishes the cleanup from the record.
//
// # Recovery
//
// New reads every record, on every configured disk (a record lies on its
// move's target), before anything moves. Phase copy: remove the copy,
// rename the retired source back to A/R if it was retired, remove the
// record. Phase commit: rename new to B/R if it is not there yet, remove
// the retired source and the record. Every step is idempotent, so a crash
// during recovery is recovered by the next start. A move directory without
// a record is garbage only if it holds nothing but a temporary record (a
// move killed while writing it). Anything else stops New with ErrRecovery,
// touching nothing: such a directory, a record whose source disk is not
// configured, or a retired source with no record (its target disk is not
// configured). A move killed before the retirement leaves nothing on A:
// its source is home and authoritative, so an agent started without B
// goes on, and the record on B is rolled back once B is configured again.
//
// # Concurrency
//
// An Agent is for one goroutine. It holds an flock on every disk
// directory, so a second agent on any of its disks fails to start.
package disks
