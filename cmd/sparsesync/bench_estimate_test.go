package main

import (
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sparsesync/sparsesync/bench"
)

// TestBenchEstimateBeforeStart: the line bench prints before it runs
// gives a time estimate: the data the cases read and write at each place
// over the write rate probed there. With dense (1 GiB, all data) at scale
// 1/16, 3 runs of the floor (each three ways) and sparsesync: 64 MiB
// written once, then 12 passes reading and writing it, 1,600 MiB, which at
// 64 MiB/s is 25 s.
func TestBenchEstimateBeforeStart(t *testing.T) {
	cfg := bench.Config{Workloads: []string{"dense"}, Scenarios: []string{"copy"}, Places: []bench.Place{{Name: "p", Dir: "/p"}},
		Runs: 3, Gen: bench.GenOptions{Scale: 1.0 / 16}}
	plan := newBenchPlan(&cfg)
	line := plan.intro(&cfg, func(dir string) (float64, error) {
		require.Equal(t, "/p", dir)
		return 64 << 20, nil
	})
	require.Contains(t, line, "; at least 25s (1.6 GiB of data read and written, at the write rate a 64 MiB probe measured: 64.0 MiB/s)")

	line = plan.intro(&cfg, func(string) (float64, error) { return 0, errors.New("read-only file system") })
	require.Contains(t, line, "no time estimate (probing /p: read-only file system)")

	// --floor-holes: a copy case's floor-holes moves the data three more
	// times a round, 9 more passes: 64 + 21 x 128 MiB, 2,752 MiB, 43 s.
	holes := cfg
	holes.FloorHoles = true
	line = newBenchPlan(&holes).intro(&holes, func(string) (float64, error) { return 64 << 20, nil })
	require.Contains(t, line, "; at least 43s (2.7 GiB of data read and written,")
}

func TestProbeWriteRate(t *testing.T) {
	dir := t.TempDir()
	r, err := probeWriteRate(dir)
	require.NoError(t, err)
	require.Positive(t, r)
	left, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Empty(t, left, "the probe leaves no file")
	_, err = probeWriteRate(dir + "/missing")
	require.Error(t, err)
	require.True(t, strings.Contains(err.Error(), "missing"))
}

// TestBenchBwlimitUsage: the bwlimit scenario runs alone and needs rates
// above zero; both mistakes are usage errors, found before anything runs.
func TestBenchBwlimitUsage(t *testing.T) {
	dir := t.TempDir()
	_, stderr, code, _ := runCLI(t, "bench", "--scenario", "bwlimit", "--scenario", "copy", "--dir", dir)
	require.Equal(t, 2, code, stderr)
	require.Contains(t, stderr, "--scenario bwlimit runs alone")
	_, stderr, code, _ = runCLI(t, "bench", "--scenario", "bwlimit", "--bwlimit-rates", "0", "--dir", dir)
	require.Equal(t, 2, code, stderr)
	require.Contains(t, stderr, "want rates above 0")
	left, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Empty(t, left)
}
