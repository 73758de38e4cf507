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

// Issue 24, its shell reproduction: a counter-off Longhorn replica made in
// a directory where ours was deleted (Longhorn's Delete keeps replica.hdr
// and live.counter). info and check read it as Longhorn does: counter off,
// both replicas RW; info says the leftover header was ignored.
func TestReplicaInfoCheckIgnoreLeftoverHeader(t *testing.T) {
	root := t.TempDir()
	r, sib := filepath.Join(root, "r"), filepath.Join(root, "sib")
	mk := func(dir string) {
		require.NoError(t, os.MkdirAll(dir, 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, "volume-head-000.img"), nil, 0o644))
		require.NoError(t, os.Truncate(filepath.Join(dir, "volume-head-000.img"), 1<<20))
		require.NoError(t, os.WriteFile(filepath.Join(dir, "volume-head-000.img.meta"),
			[]byte(`{"Name":"volume-head-000.img","Parent":"","Removed":false,"UserCreated":false,"Created":"2026-01-01T00:00:00Z","Labels":null}`+"\n"), 0o644))
		require.NoError(t, os.WriteFile(filepath.Join(dir, "volume.meta"),
			[]byte(`{"Size":1048576,"Head":"volume-head-000.img","Dirty":false,"Rebuilding":false,"Error":"","Parent":"","SectorSize":512,"BackingFilePath":"","Encrypted":false}`+"\n"), 0o644))
	}
	_, stderr, code, _ := runCLI(t, "replica", "create", "--size", "1M", r)
	require.Equal(t, 0, code, stderr)
	for _, n := range []string{"volume-head-000.img", "volume-head-000.img.meta", "volume.meta", "revision.counter"} {
		require.NoError(t, os.Remove(filepath.Join(r, n)))
	}
	mk(r)
	mk(sib)

	stdout, stderr, code, _ := runCLI(t, "replica", "info", "--json", r)
	require.Equal(t, 0, code, stderr)
	var info map[string]any
	require.NoError(t, json.Unmarshal([]byte(stdout), &info))
	require.Equal(t, false, info["revision_counter_enabled"])
	require.Nil(t, info["revision"])
	require.Equal(t, false, info["has_header"])
	require.Contains(t, info["ignored_header"], "not in the chain")
	stdout, stderr, code, _ = runCLI(t, "replica", "info", r)
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stdout, "replica.hdr     ignored, a leftover: its head image")

	stdout, stderr, code, _ = runCLI(t, "replica", "check", "--json", r, sib)
	require.Equal(t, 0, code, stderr)
	var rep struct {
		RW      []string `json:"rw"`
		Counter bool     `json:"revision_counter_enabled"`
	}
	require.NoError(t, json.Unmarshal([]byte(stdout), &rep))
	require.Equal(t, []string{r, sib}, rep.RW)
	require.False(t, rep.Counter)
}

// A replica our writer left open (unclean) into which another writer
// counted 3 writes past the count we last wrote: check cannot order it
// against a sibling at our count, says so, names it and exits 1.
func TestReplicaCheckOrderUndecided(t *testing.T) {
	root := t.TempDir()
	a, b := filepath.Join(root, "a"), filepath.Join(root, "b")
	ra, err := replica.Create(a, 1<<20, nil)
	require.NoError(t, err)
	defer ra.Close()
	rb, err := replica.Create(b, 1<<20, nil)
	require.NoError(t, err)
	for _, r := range []*replica.Replica{ra, rb} {
		for i := range 5 {
			_, err := r.WriteAt(make([]byte, 4096), int64(i)*4096)
			require.NoError(t, err)
		}
	}
	require.NoError(t, ra.Flush())
	require.NoError(t, rb.Close())
	// Longhorn's WriteAt x3 on a (revision_counter.go: cache+1 each).
	require.NoError(t, os.WriteFile(filepath.Join(a, "revision.counter"), replica.FormatRevisionCounter(8), 0o600))

	stdout, stderr, code, _ := runCLI(t, "replica", "check", a, b)
	require.Equal(t, 1, code, stdout)
	require.Contains(t, stderr, "order of the replicas cannot be decided: "+a)
	require.Equal(t, 2, strings.Count(stdout, "ERR  "), stdout)
	require.Equal(t, 2, strings.Count(stdout, "order cannot be decided: "+a), stdout)
	stdout, _, code, _ = runCLI(t, "replica", "info", a)
	require.Equal(t, 0, code)
	require.Contains(t, stdout, "foreign writes  at least 3 by another writer on top of revision 5")
}
