// Package ganeti is a cluster model and planner that takes the same
// decisions as Ganeti's hbal (cluster balancer) and hsqueeze (node-freeing
// planner), computed incrementally so that it runs far faster.
//
// The package is a pure planner: cluster state in, decisions out. The only
// I/O is in the readers (ReadText, ReadJSON), which take an io.Reader and a
// name used in error messages.
//
// # Model
//
// A Cluster holds groups, nodes, instances, cluster tags and the cluster
// instance policy, exactly as Ganeti's text backend describes them (see
// ReadText for the format and the defaults Ganeti applies). Load turns a
// Cluster into a State: the per-node book-keeping hbal keeps (free memory,
// reserved memory for N+1, used vCPUs, spindles, load, exclusion-tag and
// location counters).
//
// # Score
//
// The cluster score is hbal's: a weighted sum of 20 metrics, population
// standard deviations over online nodes of per-node ratios, and sums over
// online or offline nodes. The State keeps running sums of every metric so
// that the score after a candidate move is computed from the two or three
// nodes the move touches (O(1) in the number of nodes and instances):
//
//	for each std-dev metric k:  n, Σx, Σx²  over online nodes
//	score(move) = Σ_k w_k · f_k(aggregates with the touched nodes replaced)
//
// Ganeti recomputes the score from scratch for every candidate and keeps the
// first strictly better one, so floating-point rounding decides between
// moves that are equal in exact arithmetic. To take the same decisions the
// balancer screens all candidates with the incremental score and then
// re-scores, from scratch and in Ganeti's summation order, every candidate
// within a small window of the best one.
//
// # Balancing
//
//	repeat
//	    best := current table
//	    for each movable, auto-balanced instance (file order)
//	        for each allowed move (failover first, then per online node:
//	                replace-secondary, replace-and-failover,
//	                replace-primary, failover-and-replace; or migrate-to-node)
//	            if the move passes the hard checks and score < best: best = move
//	    stop unless best < current (and the minimum-gain rules hold)
//	    apply best
//
// # Squeeze
//
//	offline candidates := online, not master, no secondaries, only
//	                      externally mirrored primaries; sorted by number of
//	                      primaries, descending (stable)
//	online candidates  := offline nodes with a "htools:standby:" tag
//	if some node cannot host the minimal reserve instance:
//	    first prefix (shortest first, empty included) of the online
//	    candidates that, onlined and balanced, leaves every instance on an
//	    online node and every node able to host the minimal reserve;
//	    all of them if none suffices
//	else:
//	    greedily, from the end of the offline candidates, keep a node if
//	    offlining it together with the nodes kept so far, then balancing,
//	    leaves every instance on an online node and every node able to host
//	    the target reserve
//
// Before balancing a candidate set, Squeeze checks resource totals that every
// final placement must satisfy (free memory and vCPU headroom summed over the
// nodes that stay online); a set that fails them cannot succeed whatever the
// balancer does, so it is rejected without balancing. This never changes a
// decision.
//
// # Search strategies
//
// hsqueeze balances every candidate set from scratch, trying every move of
// every instance at every step: O(sets × steps × instances × nodes).
// Squeeze has four strategies (SearchAuto picks):
//
//	exact        hsqueeze's search; the decisions are hsqueeze's (checked
//	             against Debian's hsqueeze on Ganeti's clusters and 80
//	             generated ones)
//	bounded      exact, but a step scores only the migrations that a lower
//	             bound on their score does not rule out (below); the same
//	             move at every step as exact, so the same decision
//	pruned       each step tries an instance only on the TopK nodes ranked
//	             best for its shape (size, template, status, tags) plus the
//	             nodes changed since the ranking; approximate (took
//	             hsqueeze's decision on every differential case, unproven)
//	incremental  pruned, and each candidate set continues from the balanced
//	             state of the last accepted set instead of starting over;
//	             approximate: hsqueeze's decision on about 85% of the
//	             differential cases
//
// Auto is bounded unless movable DRBD instances × online nodes exceed
// ExactLimit (750,000); only then does it fall back to pruned or
// incremental. A bounded step keeps the targets' side of the bound (per
// shape and node) between steps and recomputes it only for the nodes a
// move changed, refreshing it every refreshEvery steps; what remains in
// proportion to the cluster is one pass over the movable instances.
//
// The bound: after migrating instance i to node t, each deviation metric is
//
//	sd = sqrt(V0 + α(i) + β(t) − 2·a(i)·b(t)/n²)
//
// with a, b the changes of the metric's shifted sum on the source and the
// target. The cross term is bounded by the largest |b|, and sqrt, concave,
// lies above its chord over the range α+β takes, so
//
//	score(i, t) ≥ K(i) + T(shape(i), t)
//
// computed per step in O(instances + shapes × nodes) from cached per-node
// data. A migration is scored only while this bound is within
// estimateWindow of the best estimate found; those left out cannot be the
// best move (their estimate and exact score exceed the best ones by more
// than the rounding estimateWindow covers). The candidates kept go back into
// Ganeti's scan order before the exact re-scoring, so ties go to the same
// first move. DRBD disk moves get the same kind of bound (see bound.go):
// the instance's own nodes and the target are intervals over the reserve
// the new secondary already keeps for its peer, the one thing coupling
// them. TestBoundedStepsMatchExact checks the moves step by step against
// the full scan on 220 generated clusters (DRBD shares 0 to 20%);
// TestDRBDBoundBelowEstimate checks every DRBD disk move's bound and
// intervals against applyMove; the hsqueeze differential tests run the
// bounded search too.
//
// Work reused without changing a decision: cached per-node target changes
// and per-instance source changes until the node changes; the resource
// totals check above; and, when no prefix of standby nodes suffices, the
// balance of the whole list (already computed) as the plan.
//
// # Ganeti quirks kept
//
// Instances that are not running use no memory; memory a node reports free
// beyond what its instances explain is not counted; N+1 failure is "<" when
// loading and "<=" after a move; a DRBD instance's location score after
// replace-and-failover counts the new primary and the old primary (now its
// secondary); location-exclusion pairs are counted once per (location,
// exclusion tag) with Σ(count-1). The score's rounding is reproduced by
// re-scoring near-best candidates in Ganeti's summation order.
//
// # Concurrency
//
// Cluster values are plain data. A State is not safe for concurrent use;
// planners copy what they need, so distinct calls may run in parallel. A
// balancing step on a large cluster scans instances on GOMAXPROCS
// goroutines that only read the state.
package ganeti
