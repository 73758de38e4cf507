package replica

import "testing"

// RebuildResult is what this package's tests read of rebuild.Stats.
type RebuildResult struct{ Revision int64 }

// RebuildForTest is rebuild.Rebuild for this package's internal tests,
// which cannot import replica/rebuild (it imports replica): the external
// test file rebuild_external_test.go sets it. With remote set, remote is
// served over loopback TCP (no authentication, no retries) and rebuilt
// from there, source "" meaning no local source.
var RebuildForTest func(t *testing.T, source, target, remote string) (RebuildResult, error)

// rebuildForTest calls RebuildForTest.
func rebuildForTest(t *testing.T, source, target, remote string) (RebuildResult, error) {
	t.Helper()
	if RebuildForTest == nil {
		t.Fatal("rebuild_external_test.go did not set RebuildForTest")
	}
	return RebuildForTest(t, source, target, remote)
}
