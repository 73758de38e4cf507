package longhorn

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestRebalanceOptionsNilMeansDefaults: nil plans what the zero value
// plans, and a negative MaxPasses is refused naming the field.
func TestRebalanceOptionsNilMeansDefaults(t *testing.T) {
	c := scaleCluster(1, 30, 100)
	require.NoError(t, c.Index())
	want, err := RebalanceUntilStable(c, &RebalanceOptions{})
	require.NoError(t, err)
	got, err := RebalanceUntilStable(c, nil)
	require.NoError(t, err)
	require.Equal(t, want, got)
	one, err := Rebalance(c, nil)
	require.NoError(t, err)
	if len(want) > 0 {
		require.Equal(t, want[0], one)
	}
	p, err := Place(c, nil)
	require.NoError(t, err)
	pz, err := Place(c, &PlaceOptions{})
	require.NoError(t, err)
	require.Equal(t, pz, p)

	for name, f := range map[string]func(*RebalanceOptions) error{
		"Rebalance":            func(o *RebalanceOptions) error { _, err := Rebalance(c, o); return err },
		"RebalanceUntilStable": func(o *RebalanceOptions) error { _, err := RebalanceUntilStable(c, o); return err },
		"PlanRebalance":        func(o *RebalanceOptions) error { _, err := PlanRebalance(c, o); return err },
	} {
		err := f(&RebalanceOptions{MaxPasses: -1})
		require.True(t, errors.Is(err, ErrInvalidOptions), "%s: %v", name, err)
		require.ErrorContains(t, err, "MaxPasses -1", name)
	}
}

// TestIndexRefusesNilAndDuplicates: a Cluster built in code (not read, so
// the reader's checks never ran) with a nil or twice-named node or volume
// is refused by Index, naming it.
func TestIndexRefusesNilAndDuplicates(t *testing.T) {
	vol := func(name string) *Volume { return &Volume{Name: name, NumberOfReplicas: 1} }
	for want, c := range map[string]*Cluster{
		"nodes[1]: nil node":                   {Nodes: []*Node{{Name: "a"}, nil}},
		`node "a": metadata.name: duplicate`:   {Nodes: []*Node{{Name: "a"}, {Name: "a"}}},
		"volumes[0]: nil volume":               {Volumes: []*Volume{nil}},
		`volume "v": metadata.name: duplicate`: {Volumes: []*Volume{vol("v"), vol("v")}},
	} {
		c.Settings = DefaultSettings()
		err := c.Index()
		require.True(t, errors.Is(err, ErrBadState), "%s: %v", want, err)
		require.ErrorContains(t, err, want)
	}
}
