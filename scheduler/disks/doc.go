// Package disks is a node agent that balances replica directories between
// the disks of one node under disk pressure: it measures the disks, lets
// scheduler/longhorn decide (the same disk-pressure rule `plan rebalance`
// applies to a whole cluster) and moves replicas with replica.Rebuild,
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
//	execute the moves in order
//
// No rule is repeated here: a move the agent makes is always one the
// planner made. A replica whose directory lock is held (a writer has it
// open) is skipped, not waited on.
//
// # A move, and why it is safe
//
// Replica R moves from disk A to disk B. Each move has an id and
// directories A/.sparsesync-disks/ID (the record, on the source disk) and
// B/.sparsesync-disks/ID (the copy being made). Names starting with a dot
// are never taken for replica directories, by this agent or by Longhorn.
//
//	flock A/R                       the replica lock writers take: a writer
//	                                has it → skip; we hold it to the end
//	write A/.sparsesync-disks/ID/intent.json {phase: copy}, fsync file+dir
//	A/.sparsesync-disks/ID/link/*   hard links to A/R's files (Rebuild
//	                                takes the source's lock, which we hold)
//	replica.Rebuild(link → B/.sparsesync-disks/ID/new)
//	                                reflink, copy_file_range or read/write;
//	                                every file compared and fdatasynced
//	replica.Inspect both: same size, chain, revision, epoch
//	rename A/R → A/.sparsesync-disks/ID/old, fsync
//	                                no writer can reach the source any more
//	rewrite intent.json {phase: commit}, fsync    ← the commit point
//	rename B/.sparsesync-disks/ID/new → B/R, fsync
//	remove old, link, B's move directory, then the record
//
// At every instant the replica has exactly one authoritative directory:
// the source until the record says commit, the copy after. Only one of
// A/R and B/R ever exists (between the retirement and the placement,
// neither: the replica is then in a hidden directory, under its lock until
// a crash and under the record after one).
//
// # Recovery
//
// New reads every record before anything moves. Phase copy: remove the
// copy and the links, rename old back to A/R if it was retired, remove the
// record. Phase commit: rename new to B/R if it is not there yet, remove
// old, the links and the record. Every step is idempotent, so a crash
// during recovery is recovered by the next start. A move directory without
// a record is garbage only if it holds nothing but a temporary record
// (a move killed while writing it); anything else, or a record whose
// target disk is not configured, stops New with ErrRecovery, touching
// nothing.
//
// # Concurrency
//
// An Agent is for one goroutine. It holds an flock on every disk
// directory, so a second agent on any of its disks fails to start.
package disks
