package bench_test

import (
	"testing"

	"github.com/sparsesync/sparsesync/bench"
)

// TestScenarios: the copy comes first, then every change script by name.
func TestScenarios(t *testing.T) {
	got := bench.Scenarios()
	changes := bench.Changes()
	if len(got) != len(changes)+1 || got[0] != bench.ScenarioCopy {
		t.Fatalf("Scenarios() = %q, want %q then the %d change scripts", got, bench.ScenarioCopy, len(changes))
	}
	for i, c := range changes {
		if got[i+1] != c.Name {
			t.Errorf("scenario %d = %q, want %q", i+1, got[i+1], c.Name)
		}
		if _, err := bench.ChangeNamed(got[i+1]); err != nil {
			t.Error(err)
		}
	}
}
