// Package longhorn plans where Longhorn replicas go: placement of missing
// replicas, auto-balancing and disk-pressure moves, and the CPU requests of
// the instance manager pods. The planners are pure functions: a [Cluster]
// (read from `kubectl get ... -o json` output by [ReadState]) goes in, a
// decision comes out; they do no I/O, never modify the cluster, and give
// the same answer for the same state (every tie is broken by name, never by
// map order). A Cluster may be read by several goroutines at once; each
// planner call works on its own simulation of it.
//
// The behaviour follows Longhorn's enhancement proposals (disk
// anti-affinity, replica auto-balance for disk pressure, CPU reservation)
// where Longhorn's code drifted from them; the design notes in
// shared/design/scheduler.md (sections 1 and 4) list the differences.
//
// # Placement
//
// For each volume, in name order, and each missing replica:
//
//	missing = numberOfReplicas − replicas that are scheduled, not being
//	          deleted, not evicting, and not failed (or failed but still
//	          reusable: node and disk set, rebuildRetryCount < 5, not
//	          evicting, while the replenishment wait since
//	          status.lastDegradedAt has not expired)
//	node gate:  not deleting, Ready, Schedulable, spec.allowScheduling,
//	            not spec.evictionRequested
//	tiers (first tier with a candidate disk wins):
//	    unused nodes in unused zones; then
//	    zone hard:            only-evicting nodes in only-evicting zones
//	    zone soft, node hard: unused nodes; only-evicting nodes
//	    zone soft, node soft: unused nodes; used nodes
//	tags:       node selector ⊆ node tags (empty selector: any node when
//	            allow-empty-node-selector-volume, else untagged nodes only)
//	disk:       status present, allowScheduling, not evicting, condition
//	            Schedulable, type matches the data engine (v1 filesystem,
//	            v2 block), disk selector ⊆ disk tags (same empty rule)
//	capacity:   max > 0, available > 0,
//	            available − actualSize > floor(max × minimal% / 100)
//	            size + scheduled ≤ floor((max − reserved) × overProvisioning% / 100)
//	disk anti-affinity over the tier's candidates: keep the disks holding
//	            the fewest replicas of the volume (soft: the least count,
//	            as the proposal says; hard: only disks holding none)
//	best disk:  usable = max(0, available − reserved − scheduled); the node
//	            with the largest sum of usable over its kept disks, then
//	            its disk with the largest usable; ties by name
//
// A replica placed earlier in the run adds its size to its disk's scheduled
// bytes and counts as used for the next replica of its volume. When no disk
// passes, there is no fallback: the volume is reported unschedulable with
// the reasons counted per node (node-level filters) or per disk, as
// kube-scheduler does. Only the capacity predicates decide whether a
// replica fits; usable space only ranks candidates, so over-provisioning
// keeps working. Data locality and instance-manager or engine-image
// readiness are not modelled (the state does not carry them).
//
// # Rebalancing
//
// One pass, at most one move per volume, for volumes whose effective
// replica-auto-balance is not disabled, that are healthy and have exactly
// numberOfReplicas running replicas on ready nodes, none evicting:
//
//	least-effort zone: fewer zones used than replicas and an open zone
//	    unused → move a replica from the most used zone into it
//	least-effort node: likewise for nodes
//	best-effort node:  most − least replicas per open node ≥ 2 → move one
//	    from the most loaded node to a least loaded one in the same zone
//	    or in a zone holding fewer replicas than the source's
//	disk pressure (best-effort, threshold T ≠ 0): a disk is pressured when
//	    floor(max(0, available − reserved) × 100 / max) < 100 − T; its first
//	    replica by name moves to another disk of the same node that passes
//	    every placement rule and is pressure-safe:
//	    floor((actual + scheduled + reserved) × 100 / max) < T and not
//	    itself pressured once the replica is there; the move must lower
//	    the disk's used share (the volume's actual size is not 0), or it
//	    is not made
//	best-effort zone:  like best-effort node, over zones
//
// The replica that moves off a node or zone is the one on the fullest disk
// (least available bytes, compared as integers), then by name. Every target
// is chosen by the placement code itself with the moving replica left out
// of the volume's used sets, so a planned move is always placeable and no
// hard rule (zone, node, disk anti-affinity, tags, capacity) is ever broken;
// the pressure move stays on its node, which is what lets it through node
// anti-affinity. A move frees the volume's actual size (and its size from
// scheduled) on the old disk and takes them on the new one.
//
// [RebalanceUntilStable] repeats passes until nothing moves. Balancing
// moves strictly improve, per volume, (zones used, nodes used, zone spread,
// node spread) in that order, pressure moves never create pressure, and a
// replica never returns to a disk it left, so the passes reach a fixed
// point. [PlanRebalance] also lists each pressured disk that keeps its
// replicas ([HeldDisk]) with the reason, and at its pass limit returns the
// passes computed with a [*NotStableError] naming what still moves.
//
// The nodes a volume may use depend only on the node gate and its node
// selector, fixed during a plan, so balancing computes them once per
// selector: one pass costs about O(replicas + moves × nodes), not
// O(volumes × nodes).
//
// # Concurrency
//
// The planners ([Place], [Rebalance], [RebalanceUntilStable], [PlanCPU],
// [MigrateDeprecatedCPU]) only read their Cluster, so any number may run at
// once on one Cluster once it has been indexed ([ReadState], [Loader.Cluster]
// and [Cluster.Index] do that; do not call Index concurrently with a
// planner). The values they return belong to the caller. A [Loader] is for
// one goroutine at a time. Nothing in the package keeps global state.
//
// # CPU reservation
//
// [PlanCPU] follows Longhorn 1.1-1.4 (guaranteed-engine-manager-cpu and
// guaranteed-replica-manager-cpu, integer percentages, each and their sum in
// 0..40; node fields engineManagerCPURequest and replicaManagerCPURequest in
// milli-CPU) and accepts the merged 1.5+ form (guaranteed-instance-manager-cpu
// and instanceManagerCPURequest). [MigrateDeprecatedCPU] is the 1.1.1
// upgrade step from guaranteed-engine-cpu.
package longhorn
