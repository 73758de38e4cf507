package main

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sparsesync/sparsesync/replica"
)

func TestReplicaCreateInfoCheck(t *testing.T) {
	root := t.TempDir()
	a, b := filepath.Join(root, "a"), filepath.Join(root, "b")
	g, out := testGlobals()
	require.NoError(t, runReplicaCreate(t.Context(), g, replicaCreateOptions{size: "1M", counter: "on"}, a))
	require.NoError(t, runReplicaCreate(t.Context(), g, replicaCreateOptions{size: "1048576", counter: "off"}, b))
	require.Contains(t, out.String(), "created "+a+": 1048576 bytes, revision counter on\n")
	require.Contains(t, out.String(), "created "+b+": 1048576 bytes, revision counter off\n")

	// One vocabulary with bench and check: on, off, per-write; the old
	// boolean spelling still works; anything else is bad usage.
	for _, tc := range []struct{ flag, want string }{{"per-write", "per-write"}, {"false", "off"}, {"true", "on"}} {
		dir := filepath.Join(root, "v-"+tc.flag)
		stdout, stderr, code, _ := runCLI(t, "replica", "create", "--size", "64K", "--revision-counter", tc.flag, dir)
		require.Equal(t, 0, code, stderr)
		require.Equal(t, "created "+dir+": 65536 bytes, revision counter "+tc.want+"\n", stdout)
		// check takes create's word for the same replica.
		stdout, stderr, code, _ = runCLI(t, "replica", "check", "--revision-counter", tc.flag, dir)
		if tc.flag == "per-write" {
			require.Equal(t, 0, code, stderr)
			require.True(t, strings.HasPrefix(stdout, "RW "), stdout)
		}
	}
	_, stderr, code, _ := runCLI(t, "replica", "create", "--size", "64K", "--revision-counter", "sometimes", filepath.Join(root, "bad"))
	require.Equal(t, 2, code)
	require.Contains(t, stderr, `"sometimes" is not on, off or per-write`)
	require.NoDirExists(t, filepath.Join(root, "bad"))

	// Several directories: one volume, checked together without complaint.
	c, d := filepath.Join(root, "c"), filepath.Join(root, "d")
	require.NoError(t, runReplicaCreate(t.Context(), g, replicaCreateOptions{size: "64K", counter: "on"}, c, d))
	out.Reset()
	require.NoError(t, runReplicaCheck(t.Context(), g, replicaCheckOptions{counter: "auto"}, c, d))
	require.Equal(t, 2, strings.Count(out.String(), "RW "), out.String())

	out.Reset()
	require.NoError(t, runReplicaInfo(t.Context(), g, replicaInfoOptions{json: true}, a))
	var info map[string]any
	require.NoError(t, json.Unmarshal(out.Bytes(), &info))
	for _, k := range []string{"dir", "size", "head", "revision_counter_enabled", "revision", "head_mtime_ns", "head_allocated_bytes", "chain"} {
		require.Contains(t, info, k)
	}
	require.Equal(t, float64(1<<20), info["size"])
	require.Equal(t, true, info["revision_counter_enabled"])
	require.Equal(t, float64(0), info["revision"])
	require.Equal(t, []any{"volume-head-000.img"}, info["chain"])

	out.Reset()
	require.NoError(t, runReplicaInfo(t.Context(), g, replicaInfoOptions{json: true}, b))
	info = nil
	require.NoError(t, json.Unmarshal(out.Bytes(), &info))
	require.Nil(t, info["revision"], "revision is null with the counter off")

	// a (counter on) and b (off): with the volume's mode forced on, b is ERR.
	out.Reset()
	require.NoError(t, runReplicaCheck(t.Context(), g, replicaCheckOptions{json: true, counter: "on"}, a, b))
	var rep struct {
		Replicas []struct{ Dir, Mode, Reason string }
		RW       []string
	}
	require.NoError(t, json.Unmarshal(out.Bytes(), &rep))
	require.Equal(t, []string{a}, rep.RW)
	require.Equal(t, "ERR", rep.Replicas[1].Mode)
	require.Contains(t, rep.Replicas[1].Reason, "revision counter off, volume has it on")

	// A garbage counter leaves no replica RW: exit status 1, still a report.
	require.NoError(t, os.WriteFile(filepath.Join(a, replica.RevisionCounterFile), []byte("garbage"), 0o600))
	out.Reset()
	err := runReplicaCheck(t.Context(), g, replicaCheckOptions{counter: "on"}, a)
	require.ErrorIs(t, err, replica.ErrNoHealthyReplica)
	require.Equal(t, 1, exitCode(t.Context(), err))
	require.True(t, strings.HasPrefix(out.String(), "ERR"), out.String())
	require.Contains(t, out.String(), "revision counter unreadable")

	err = runReplicaInfo(t.Context(), g, replicaInfoOptions{}, a)
	require.ErrorIs(t, err, replica.ErrCorrupt)
	require.Contains(t, errorLine(err), filepath.Join(a, replica.RevisionCounterFile))
}

func TestReplicaUsageErrors(t *testing.T) {
	g, _ := testGlobals()
	dir := filepath.Join(t.TempDir(), "r")
	for _, size := range []string{"", "abc", "-1", "0"} {
		err := runReplicaCreate(t.Context(), g, replicaCreateOptions{size: size, counter: "on"}, dir)
		require.Equal(t, 2, exitCode(t.Context(), err), "size %q", size)
	}
	err := runReplicaCreate(t.Context(), g, replicaCreateOptions{size: "1000", counter: "on"}, dir)
	require.Error(t, err)
	require.Equal(t, 2, exitCode(t.Context(), err), "a size out of range is bad usage")
	_, statErr := os.Stat(filepath.Join(dir, replica.VolumeMetaFile))
	require.True(t, errors.Is(statErr, os.ErrNotExist), "a refused create leaves no replica")
	err = runReplicaCheck(t.Context(), g, replicaCheckOptions{counter: "maybe"}, dir)
	require.Equal(t, 2, exitCode(t.Context(), err))
	err = runReplicaBench(t.Context(), g, replicaBenchOptions{qd: 1, seconds: 1, counter: "sometimes", size: "1M"}, dir)
	require.Equal(t, 2, exitCode(t.Context(), err))

	root := newRootCommand(g)
	root.SetArgs([]string{"replica", "info"})
	err = root.ExecuteContext(t.Context())
	require.Equal(t, 2, exitCode(t.Context(), err), "missing DIR")
}

func TestReplicaBench(t *testing.T) {
	g, out := testGlobals()
	dir := filepath.Join(t.TempDir(), "bench")
	for i, mode := range []string{"off", "on", "per-write", "on"} {
		flush := i == 3 // durable writes: a Flush after each
		out.Reset()
		require.NoError(t, runReplicaBench(t.Context(), g, replicaBenchOptions{qd: 2, seconds: 0.2, counter: mode, size: "4M", json: true, flush: flush}, dir))
		var res struct {
			Writes   int64
			IOPS     float64
			Revision int64
			Counter  string `json:"revision_counter"`
			Flush    bool
		}
		require.NoError(t, json.Unmarshal(out.Bytes(), &res))
		require.Positive(t, res.Writes)
		require.Positive(t, res.IOPS)
		require.Equal(t, mode, res.Counter)
		require.Equal(t, flush, res.Flush)
		if mode == "off" {
			require.Zero(t, res.Revision)
		} else {
			// 4 fill writes of 1 MiB plus every measured write.
			require.Equal(t, res.Writes+4, res.Revision)
		}
		_, err := os.Stat(dir)
		require.True(t, errors.Is(err, os.ErrNotExist), "bench removes its directory")
	}
}
