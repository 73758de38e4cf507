package ganeti

import (
	"errors"
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestBalanceOptionsNilAndZeroAreDefaults: nil, the zero value and
// DefaultBalanceOptions plan the same moves, the ones of hbal's defaults
// spelled out; a negative MaxRounds plans no move (hbal -l 0).
func TestBalanceOptionsNilAndZeroAreDefaults(t *testing.T) {
	require.Equal(t, &BalanceOptions{MinGain: 0.01, MinGainLimit: 0.1, MinScore: 1e-9}, DefaultBalanceOptions())
	c := loadFile(t, "testdata/ganeti/hbal-location-1.data")
	want, err := Balance(c, &BalanceOptions{MinGain: 0.01, MinGainLimit: 0.1, MinScore: 1e-9})
	require.NoError(t, err)
	require.NotEmpty(t, want.Moves)
	for name, o := range map[string]*BalanceOptions{"nil": nil, "zero": {}, "default": DefaultBalanceOptions()} {
		got, err := Balance(c, o)
		require.NoError(t, err, name)
		require.Equal(t, want, got, name)
	}
	none, err := Balance(c, &BalanceOptions{MaxRounds: -1})
	require.NoError(t, err)
	require.Empty(t, none.Moves)
	require.Equal(t, want.InitialScore, none.FinalScore)
}

// TestOptionsValidateNamesTheField: each bad option is refused with
// ErrOptions and a message naming the field, before the cluster is read.
func TestOptionsValidateNamesTheField(t *testing.T) {
	c := loadFile(t, "testdata/ganeti/hbal-location-1.data")
	for _, tc := range []struct {
		field string
		b     *BalanceOptions
		s     *SqueezeOptions
	}{
		{"MinGain", &BalanceOptions{MinGain: math.NaN()}, nil},
		{"MinGainLimit", &BalanceOptions{MinGainLimit: math.Inf(1)}, nil},
		{"MinScore", &BalanceOptions{MinScore: math.Inf(-1)}, nil},
		{"MinimalResources", nil, &SqueezeOptions{MinimalResources: -1}},
		{"TargetResources", nil, &SqueezeOptions{TargetResources: math.NaN()}},
		{"ExactLimit", nil, &SqueezeOptions{ExactLimit: -1}},
		{"PrunedLimit", nil, &SqueezeOptions{PrunedLimit: -1}},
		{"TopK", nil, &SqueezeOptions{TopK: -1}},
		{"Moves", nil, &SqueezeOptions{Moves: MoveAll + 1}},
		{"Search", nil, &SqueezeOptions{Search: -1}},
	} {
		var err error
		if tc.b != nil {
			_, err = Balance(c, tc.b)
		} else {
			_, err = Squeeze(c, tc.s)
		}
		require.True(t, errors.Is(err, ErrOptions), "%s: %v", tc.field, err)
		require.ErrorContains(t, err, tc.field+" ")
	}
}

// TestSqueezeDoesNotChangeOptions: the caller's options are read, not
// filled in.
func TestSqueezeDoesNotChangeOptions(t *testing.T) {
	c := loadFile(t, "testdata/ganeti/hbal-location-1.data")
	o := &SqueezeOptions{Moves: MoveAll}
	_, err := Squeeze(c, o)
	require.NoError(t, err)
	require.Equal(t, &SqueezeOptions{Moves: MoveAll}, o)
	b := &BalanceOptions{}
	_, err = Balance(c, b)
	require.NoError(t, err)
	require.Equal(t, &BalanceOptions{}, b)
}
