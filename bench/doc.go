// Package bench measures sparsesync against the tools people use for the
// same job (cp, rsync, qemu-img, bmaptool, Longhorn's ssync) on named,
// seeded workloads, next to the physical floor of the same devices, and
// writes the result as a terminal table, one JSON document and a
// self-contained HTML report. `sparsesync bench` is its command line.
//
// # Method
//
// A case is a workload (a sparse source file), a scenario (a full copy to a
// new file, or a re-sync after a change script) and a directory (a
// filesystem). Every tool of a case and the floor run once per round, in an
// order rotated each round, so the two sides of every ratio are measured
// seconds apart under the same machine load:
//
//	for round in 1..N:
//	    for tool in rotate(tools, round):
//	        reset the target (remove it, or restore the old version)
//	        sync; drop caches (root only)
//	        run the tool as a child process; syncfs the target if the tool
//	            does not sync
//	        record wall, user and system CPU, the machine's busy CPU, peak
//	            RSS, bytes written to and read from the block device
//
// With Config.Steady, sparsesync's local re-sync starts from the state a
// re-sync that runs every night finds: before each run, untimed, a plain
// copy of the version before the old one is re-synced by sparsesync to the
// old version, which leaves its quick-check mark and manifest; the timed
// run then re-syncs the changed source into that target. The peers keep
// no state and start from the plain copy of the old version as always.
//
// The report gives per tool the median, minimum and maximum of each figure
// and, against sparsesync, the median over rounds of the per-round time
// ratio and busy CPU ratio (package bench/stats). The busy CPU is the
// whole machine's (/proc/stat) from the start of the run to the end of its
// sync: a child's user and system CPU leave out the flusher threads that
// write back for the harness's syncfs what a tool such as cp left dirty,
// while a tool that syncs its own target (sparsesync) pays that writeback
// in its own system time.
//
// # Floor
//
// The floor of a case is what the hardware allows: the source's data bytes
// read at a deep queue while as many bytes are written to a new file on
// the target filesystem and made durable (for a re-sync: both files' data
// read, the changed bytes written), once with O_DIRECT, once through the
// page cache, and once reading with O_DIRECT and writing through the
// cache, the workload cold before each; the fastest counts
// (Sample.FloorMethod says which). It runs in the same rounds as the
// tools.
//
// WriteBench, a random-write benchmark of a replica directory, is here too.
package bench
