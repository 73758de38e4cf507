package ganeti

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestBalanceMatchesHbalGenerated: on generated clusters (both sizes of the
// squeeze suite) the initial and final scores equal hbal's.
func TestBalanceMatchesHbalGenerated(t *testing.T) {
	bin := findTool(t, "hbal")
	for i := 0; i < generatedSqueezeCases; i += 2 {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			t.Parallel()
			c, _, _ := genSqueezeCase(i)
			path := writeTextFile(t, c)
			ini, fin := hbalScores(t, bin, path)
			res, err := Balance(c, DefaultBalanceOptions())
			require.NoError(t, err)
			require.InDelta(t, ini, res.InitialScore, 1e-6, "initial score")
			require.InDelta(t, fin, res.FinalScore, 1e-6, "final score (%d moves)", len(res.Moves))
		})
	}
}
