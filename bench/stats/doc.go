// Package stats holds the few statistics every sparsesync benchmark reports:
// the median, minimum and maximum of a set of runs, and the median of paired
// ratios (two tools measured back to back in each run, the ratio taken per
// run, then the median over runs: on a shared machine whose load drifts
// during a session, that follows the drift better than a ratio of medians).
//
// It imports nothing of ours, so the packages' own _test.go benchmarks can
// use it without an import cycle.
package stats
