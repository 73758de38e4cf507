package replica

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sparsesync/sparsesync/internal/testutil/lhdir"
)

// The mixed-writer tests run longhorn-engine's own pkg/replica, built
// unmodified from the source archive in /work/shared/peers (see its
// README) with the small program in testdata/lhpeer, against directories
// our writer left. The peer program is built once per test process.

const lhArchive = "longhorn-engine-5939910c.tar.gz"

var lhPeerBuild peerBuild

type peerBuild struct {
	once sync.Once
	dir  string // removed by TestMain
	bin  string
	skip string
}

// TestMain removes the peer's build directory after the tests (the
// extracted Longhorn tree stays in the user's cache directory). In a run of
// the whole package it starts building the peer at once: the build (a cgo
// program and Longhorn's vendor tree, about 19 s with an empty build cache)
// then overlaps the tests that wait on fsync instead of holding up the
// first test that needs it.
func TestMain(m *testing.M) {
	flag.Parse()
	if f := flag.Lookup("test.run"); f != nil && f.Value.String() == "" { // children run with -test.run
		go lhPeerBuild.build()
	}
	code := m.Run()
	lhPeerBuild.build() // waits for a build still running
	if lhPeerBuild.dir != "" {
		os.RemoveAll(lhPeerBuild.dir)
	}
	os.Exit(code)
}

// build builds the peer once; a second caller waits for the first.
func (b *peerBuild) build() {
	b.once.Do(func() { b.dir, b.bin, b.skip = buildLonghornPeer() })
}

// longhornPeer returns the path of the built peer, or skips the test (fails
// under SPARSESYNC_REQUIRE_TOOLS=1) when Go, the archive or libqcow (cgo,
// for pkg/backingfile) is missing.
func longhornPeer(t *testing.T) string {
	t.Helper()
	b := &lhPeerBuild
	b.build()
	if b.skip != "" {
		if os.Getenv("SPARSESYNC_REQUIRE_TOOLS") == "1" {
			t.Fatalf("Longhorn peer unavailable and SPARSESYNC_REQUIRE_TOOLS=1: %s", b.skip)
		}
		t.Skip("Longhorn peer unavailable: " + b.skip)
	}
	return b.bin
}

func buildLonghornPeer() (dir, bin, skip string) {
	peers := os.Getenv("SPARSESYNC_PEERS")
	if peers == "" {
		peers = "/work/shared/peers"
	}
	archive := filepath.Join(peers, lhArchive)
	if _, err := os.Stat(archive); err != nil {
		return dir, "", err.Error()
	}
	goBin := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(goBin); err != nil {
		if goBin, err = exec.LookPath("go"); err != nil {
			return dir, "", "no go command"
		}
	}
	code, err := os.ReadFile("testdata/lhpeer/main.go")
	if err != nil {
		return dir, "", err.Error()
	}
	tree, err := peerTree(archive)
	if err != nil {
		return dir, "", err.Error()
	}
	// The program's package is named for its content, so that concurrent
	// runs of different versions of it share the tree.
	sum := sha256.Sum256(code)
	pkg := "ourpeer-" + hex.EncodeToString(sum[:6])
	if err := writeOnce(filepath.Join(tree, pkg), "main.go", code); err != nil {
		return dir, "", err.Error()
	}
	dir, err = os.MkdirTemp("", "sparsesync-lhpeer-")
	if err != nil {
		return "", "", err.Error()
	}
	bin = filepath.Join(dir, "lhpeer")
	// No -trimpath: the standard library is then compiled as for our own
	// tests and comes from the build cache (a cold build 32 s -> 19 s); the
	// tree's fixed path keeps Longhorn's packages cached between runs.
	cmd := exec.Command(goBin, "build", "-mod=vendor", "-o", bin, "./"+pkg)
	cmd.Dir = tree
	cmd.Env = append(os.Environ(), "CGO_ENABLED=1", "GOFLAGS=-mod=vendor")
	if out, err := cmd.CombinedOutput(); err != nil {
		return dir, "", fmt.Sprintf("go build (needs libqcow-dev): %v: %s", err, truncate(string(out), 2000))
	}
	return dir, bin, ""
}

// peerTree returns Longhorn's source tree extracted from archive into a
// directory of the user's cache (or the temporary directory) named for the
// archive, extracting it once: into a fresh directory renamed into place,
// so a concurrent test process sees the whole tree or none.
func peerTree(archive string) (string, error) {
	base, err := os.UserCacheDir()
	if err != nil || os.MkdirAll(base, 0o755) != nil {
		base = os.TempDir()
	}
	final := filepath.Join(base, fmt.Sprintf("sparsesync-%s-%d", strings.TrimSuffix(lhArchive, ".tar.gz"), os.Getuid()))
	tree := filepath.Join(final, "longhorn-engine")
	if _, err := os.Stat(filepath.Join(tree, "go.mod")); err == nil {
		return tree, nil
	}
	tmp, err := os.MkdirTemp(base, "sparsesync-lhpeer-src-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp) // left only when the rename lost a race
	if out, err := exec.Command("tar", "-xzf", archive, "-C", tmp).CombinedOutput(); err != nil {
		return "", fmt.Errorf("tar: %v: %s", err, out)
	}
	if err := os.Rename(tmp, final); err != nil {
		if _, serr := os.Stat(filepath.Join(tree, "go.mod")); serr != nil {
			return "", err
		}
	}
	return tree, nil
}

// writeOnce writes name with data into dir unless it is there: through a
// temporary file renamed into place, so no reader sees it half written.
func writeOnce(dir, name string, data []byte) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	path := filepath.Join(dir, name)
	if _, err := os.Stat(path); err == nil {
		return nil
	}
	f, err := os.CreateTemp(dir, ".tmp-")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}

// lh runs Longhorn's replica code on dir (see testdata/lhpeer): ops on
// one replica.New with the counter on or off; it returns the JSON lines
// printed.
func lh(t *testing.T, dir string, counter bool, ops ...string) []map[string]any {
	t.Helper()
	abs, err := filepath.Abs(dir) // construct needs an absolute path
	require.NoError(t, err)
	args := []string{"-dir", abs, "-size", "1048576", "-counter", onOff(counter)}
	cmd := exec.Command(longhornPeer(t), append(args, ops...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	require.NoError(t, cmd.Run(), "lhpeer %s: %s", strings.Join(ops, " "), stderr.String())
	var out []map[string]any
	sc := bufio.NewScanner(&stdout)
	for sc.Scan() {
		var m map[string]any
		require.NoError(t, json.Unmarshal(sc.Bytes(), &m))
		out = append(out, m)
	}
	return out
}

// lhRevision is what Longhorn's engine asks a replica at start: construct
// loads revision.counter into the cache (revision_counter.go
// initRevisionCounter), GetRevisionCounter returns it.
func lhRevision(t *testing.T, dir string) int64 {
	t.Helper()
	out := lh(t, dir, true, "rev", "close")
	require.Len(t, out, 1)
	return int64(out[0]["revision"].(float64))
}

// lhSHA is the SHA-256 of the volume as Longhorn's ReadAt reads it.
func lhSHA(t *testing.T, dir string, counter bool) string {
	t.Helper()
	out := lh(t, dir, counter, "sha", "close")
	require.Len(t, out, 1)
	return out[0]["sha256"].(string)
}

// lhStart is Longhorn's start check (longhorn-engine pkg/controller/
// control.go Start): with the counter disabled and no salvage nothing is
// checked and every replica is RW; with it enabled
// checkReplicasRevisionCounter keeps the replicas whose GetRevisionCounter
// equals the highest and marks the others ERR.
func lhStart(t *testing.T, counter bool, dirs ...string) []string {
	t.Helper()
	if !counter {
		return dirs
	}
	revs := make([]int64, len(dirs))
	for i, d := range dirs {
		revs[i] = lhRevision(t, d)
	}
	return lhdir.KeepHighest(dirs, revs)
}

func hexSHA(b [32]byte) string { return hex.EncodeToString(b[:]) }

// downgradeHeader rewrites dir's replica.hdr as sparsesync before issue 24
// wrote it: version 1, without the head's identity and the count last
// written into revision.counter.
func downgradeHeader(t *testing.T, dir string) {
	t.Helper()
	h, ok, err := readHeader(filepath.Join(dir, HeaderFile))
	require.NoError(t, err)
	require.True(t, ok)
	b := make([]byte, headerFileSize)
	h.encode(b)
	binary.LittleEndian.PutUint16(b[8:], 1)
	clear(b[92:116])
	binary.LittleEndian.PutUint32(b[headerSlotSize-4:], crc32.Checksum(b[:headerSlotSize-4], crc32c))
	require.NoError(t, os.WriteFile(filepath.Join(dir, HeaderFile), b, 0o600))
	got, ok, err := readHeader(filepath.Join(dir, HeaderFile))
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, uint16(1), got.version)
}

// ourWrites creates a replica in dir with our writer and makes n writes.
func ourWrites(t *testing.T, dir string, mode CounterMode, n int) {
	t.Helper()
	r, err := Create(dir, 1<<20, &Options{Counter: mode})
	require.NoError(t, err)
	for i := range n {
		_, err := r.WriteAt(bytes.Repeat([]byte{byte(i + 1)}, BlockSize), int64(i%256)*BlockSize)
		require.NoError(t, err)
	}
	require.NoError(t, r.Close())
}

// leftoverThenLonghorn makes a replica of ours in r (mode; its header
// rewritten as version 1 if legacy) with 40 writes, has Longhorn open and
// Delete it (replica.go Delete), then New a replica there with the counter
// on or off (lhOn) and make writes (an lhpeer op); a sibling sib is a new
// Longhorn replica with the same writes.
func leftoverThenLonghorn(t *testing.T, mode CounterMode, legacy, lhOn bool, writes string) (r, sib string) {
	t.Helper()
	root := t.TempDir()
	r, sib = filepath.Join(root, "r"), filepath.Join(root, "sib")
	ourWrites(t, r, mode, 40)
	if legacy {
		downgradeHeader(t, r)
	}
	lh(t, r, mode.Enabled(), "delete")
	left := fileNames(t, r) // what Delete leaves: our files only
	require.Contains(t, left, HeaderFile)
	require.Subset(t, []string{HeaderFile, LiveCounterFile}, left)
	lh(t, r, lhOn, writes, "close")
	lh(t, sib, lhOn, writes, "close")
	return r, sib
}

// Case 1 of issue 24: a counter-off Longhorn replica (its default since
// 1.7) re-created in a directory our counter-on writer left. Longhorn's
// Delete (replica.go) removes images, volume.meta and revision.counter,
// not replica.hdr and live.counter; New with disableRevCounter never
// creates revision.counter (construct skips initRevisionCounter). Longhorn
// keeps it RW (control.go: counter disabled, no salvage: no check); so do
// we, and info and Open read it as the counter-off replica it is. Run with
// the header as this version and as an earlier one (version 1) wrote it.
func TestMixedCounterOffOverLeftover(t *testing.T) {
	for _, legacy := range []bool{false, true} {
		t.Run(map[bool]string{false: "header-v2", true: "header-v1"}[legacy], func(t *testing.T) {
			r, sib := leftoverThenLonghorn(t, CounterOn, legacy, false, "write:20:1")
			require.NotContains(t, fileNames(t, r), RevisionCounterFile)
			want := lhSHA(t, sib, false)

			i, err := Inspect(r, nil)
			require.NoError(t, err)
			require.False(t, i.CounterEnabled)
			require.Nil(t, i.Revision)
			require.False(t, i.HasHeader)
			require.NotEmpty(t, i.IgnoredHeader)

			dirs := []string{r, sib}
			rep, err := Check(dirs, nil)
			require.NoError(t, err, "%+v", rep)
			require.False(t, rep.CounterEnabled)
			require.Equal(t, lhStart(t, false, dirs...), rep.RW)

			o, err := Open(r, nil)
			require.NoError(t, err)
			require.Equal(t, CounterOff, o.CounterMode())
			require.NoError(t, o.Close())
			require.NotContains(t, fileNames(t, r), RevisionCounterFile, "Longhorn would read it as counter on")
			require.Equal(t, want, hexSHA(exportSHA(t, r)))
			i, err = Inspect(r, nil)
			require.NoError(t, err)
			require.True(t, i.HasHeader, "our writer's own header now")
			require.Empty(t, i.IgnoredHeader)
			require.Equal(t, want, lhSHA(t, r, false))
		})
	}
}

// Case 2: a counter-off leftover, and Longhorn re-creates the replica with
// the counter on (initRevisionCounter: revision.counter 0, +1 per
// WriteAt). The count is revision.counter's, both replicas at 30 stay RW as
// in Longhorn's check, and our writer counts on from 30 so that
// Longhorn's check then prefers it.
func TestMixedCounterOnOverOffLeftover(t *testing.T) {
	for _, legacy := range []bool{false, true} {
		t.Run(map[bool]string{false: "header-v2", true: "header-v1"}[legacy], func(t *testing.T) {
			r, sib := leftoverThenLonghorn(t, CounterOff, legacy, true, "write:30:2")

			i, err := Inspect(r, nil)
			require.NoError(t, err)
			require.True(t, i.CounterEnabled)
			require.NotNil(t, i.Revision)
			require.Equal(t, int64(30), *i.Revision)
			require.NotEmpty(t, i.IgnoredHeader)

			dirs := []string{r, sib}
			rep, err := Check(dirs, nil)
			require.NoError(t, err, "%+v", rep)
			require.True(t, rep.CounterEnabled)
			require.Equal(t, lhStart(t, true, dirs...), rep.RW)
			require.Equal(t, dirs, rep.RW)

			o, err := Open(r, nil)
			require.NoError(t, err)
			require.Equal(t, CounterOn, o.CounterMode())
			require.Equal(t, int64(30), o.Revision())
			_, err = o.WriteAt(bytes.Repeat([]byte{0xee}, BlockSize), 0)
			require.NoError(t, err)
			require.NoError(t, o.Close())
			require.Equal(t, int64(31), lhRevision(t, r), "Longhorn must see our write")
			rep, err = Check(dirs, nil)
			require.NoError(t, err)
			require.Equal(t, lhStart(t, true, dirs...), rep.RW)
			require.Equal(t, []string{r}, rep.RW)
		})
	}
}

// mixedChild is what the re-executed writer does (TestMixedWriterChild).
type mixedChild struct {
	Dir string
	// Writes 4 KiB writes with a Flush after every FlushEvery, then Tail
	// more without a flush, then "R" in Log, then it waits to be killed.
	Writes, FlushEvery, Tail int
	// Forever: Workers goroutines write and flush until killed; each
	// completed Flush logs "F n", n the writes acknowledged before it
	// was called.
	Forever bool
	Workers int
	Log     string
}

const mixedChildEnv = "SPARSESYNC_REPLICA_MIXED_CHILD"

func TestMixedWriterChild(t *testing.T) {
	raw := os.Getenv(mixedChildEnv)
	if raw == "" {
		t.Skip("helper process of the mixed-writer tests")
	}
	var spec mixedChild
	if err := json.Unmarshal([]byte(raw), &spec); err != nil {
		t.Fatal(err)
	}
	logf, err := os.OpenFile(spec.Log, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	logLine := func(s string) {
		if _, err := logf.Write([]byte(s + "\n")); err != nil {
			panic(err)
		}
	}
	r, err := Open(spec.Dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	b := alignedBuf(BlockSize)
	if !spec.Forever {
		for i := range spec.Writes + spec.Tail {
			b[0] = byte(i)
			if _, err := r.WriteAt(b, int64(i%256)*BlockSize); err != nil {
				t.Fatal(err)
			}
			if i < spec.Writes && (i+1)%spec.FlushEvery == 0 {
				if err := r.Flush(); err != nil {
					t.Fatal(err)
				}
			}
		}
		logLine("R")
		time.Sleep(time.Minute) // the parent kills us
		os.Exit(3)
	}
	var acked sync.Mutex
	n := 0
	logLine("R")
	var wg sync.WaitGroup
	for w := range spec.Workers {
		wg.Go(func() {
			p := alignedBuf(BlockSize)
			for i := 0; ; i++ {
				p[0] = byte(i)
				if _, err := r.WriteAt(p, int64((i*spec.Workers+w)%256)*BlockSize); err != nil {
					panic(err)
				}
				acked.Lock()
				n++
				covered := n
				acked.Unlock()
				if i%(w+3) == 0 {
					if err := r.Flush(); err != nil {
						panic(err)
					}
					logLine(fmt.Sprintf("F %d", covered))
				}
			}
		})
	}
	wg.Wait()
}

// runMixedChild starts the writer on spec.Dir and returns once it logged
// "R"; kill ends it with SIGKILL and returns the log; log is its path.
func runMixedChild(t *testing.T, spec mixedChild) (kill func() string, log string) {
	t.Helper()
	exe, err := os.Executable()
	require.NoError(t, err)
	spec.Log = filepath.Join(t.TempDir(), "log")
	js, _ := json.Marshal(spec)
	cmd := exec.Command(exe, "-test.run=^TestMixedWriterChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), mixedChildEnv+"="+string(js))
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	require.NoError(t, cmd.Start())
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(5 * time.Millisecond) {
		b, _ := os.ReadFile(spec.Log)
		if bytes.HasPrefix(b, []byte("R\n")) || bytes.Contains(b, []byte("\nR\n")) {
			break
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("writer never became ready: %s", stderr.String())
		}
	}
	return func() string {
		require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
		cmd.Wait()
		ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus)
		require.True(t, ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL, "writer was not killed: %s", stderr.String())
		b, err := os.ReadFile(spec.Log)
		require.NoError(t, err)
		return string(b)
	}, spec.Log
}

// killedWriter creates a counter-on replica in dir with prior writes,
// closed cleanly; then a re-executed writer makes writes more with a Flush
// after every 50, then tail more without one, and is killed (SIGKILL).
func killedWriter(t *testing.T, dir string, prior, writes, tail int) {
	t.Helper()
	if testing.Short() {
		t.Skip("re-executes the test binary")
	}
	ourWrites(t, dir, CounterOn, prior)
	kill, _ := runMixedChild(t, mixedChild{Dir: dir, Writes: writes, FlushEvery: 50, Tail: tail})
	kill()
}

func readRC(t *testing.T, dir string) int64 {
	t.Helper()
	n, err := readRevisionCounter(filepath.Join(dir, RevisionCounterFile))
	require.NoError(t, err)
	return n
}

// Case 3: the leftover of a killed writer of ours (an unclean header ahead
// of everything), then Longhorn's Delete and a new counter-on Longhorn
// replica with 30 writes. Longhorn keeps it and an up-to-date sibling at
// 30 RW; so do we: the header's head image is gone, so is the header.
func TestMixedKilledWriterLeftover(t *testing.T) {
	root := t.TempDir()
	r, sib := filepath.Join(root, "r"), filepath.Join(root, "sib")
	killedWriter(t, r, 0, 150, 50)
	i, err := Inspect(r, nil)
	require.NoError(t, err)
	require.Equal(t, int64(200), *i.Revision, "the killed writer's live count")

	lh(t, r, true, "delete")
	lh(t, r, true, "write:30:3", "close")
	lh(t, sib, true, "write:30:3", "close")

	i, err = Inspect(r, nil)
	require.NoError(t, err)
	require.Equal(t, int64(30), *i.Revision)
	require.False(t, i.HasHeader)
	require.Contains(t, i.IgnoredHeader, "not in the chain")

	dirs := []string{r, sib}
	rep, err := Check(dirs, nil)
	require.NoError(t, err, "%+v", rep)
	require.Equal(t, lhStart(t, true, dirs...), rep.RW)
	require.Equal(t, dirs, rep.RW)

	// Rebuild and Open read Longhorn's files alone too. Over TCP the
	// source's inodes are unknown: revision.counter below the count the
	// header says we last wrote into it tells the leftover there.
	dst := filepath.Join(root, "copy")
	res, err := rebuildForTest(t, r, dst, "")
	require.NoError(t, err)
	require.Equal(t, int64(30), res.Revision)
	res, err = rebuildForTest(t, "", filepath.Join(root, "tcp"), r)
	require.NoError(t, err)
	require.Equal(t, int64(30), res.Revision)
	require.NotContains(t, fileNames(t, filepath.Join(root, "tcp")), HeaderFile)
	o, err := Open(r, nil)
	require.NoError(t, err)
	require.Equal(t, int64(30), o.Revision())
	require.NoError(t, o.Close())
	require.Equal(t, lhSHA(t, sib, true), hexSHA(exportSHA(t, r)))
	require.Equal(t, lhStart(t, true, r, sib, dst), []string{r, sib, dst})
}

// Case 4: Longhorn adopts a directory whose writer of ours was killed.
// 100 writes closed cleanly, then a writer flushed at 300 and was killed
// at 350; v2 is rebuilt from it (count 350); Longhorn opens v1 and writes
// 10: it starts from revision.counter (300, the last flush; before issue
// 24 it would have been the 100 of the last Open), so it says 310.
// Longhorn's own rule (control.go checkReplicasRevisionCounter) then drops
// v1, the replica that holds every write. Ours must not call them equal
// (350 = 350 before the fix): v1 holds writes of another writer on top of
// 350, so the order is undecided and v1 is named.
func TestMixedLonghornAdoptsKilledWriter(t *testing.T) {
	root := t.TempDir()
	v1, v2 := filepath.Join(root, "v1"), filepath.Join(root, "v2")
	killedWriter(t, v1, 100, 200, 50)
	require.Equal(t, int64(300), readRC(t, v1), "revision.counter holds the last flush's count after the kill")
	res, err := rebuildForTest(t, v1, v2, "")
	require.NoError(t, err)
	require.Equal(t, int64(350), res.Revision)

	lh(t, v1, true, "write:10:4", "close")
	require.Equal(t, int64(310), lhRevision(t, v1))
	dirs := []string{v1, v2}
	require.Equal(t, []string{v2}, lhStart(t, true, dirs...), "Longhorn drops v1")
	require.NotEqual(t, lhSHA(t, v1, true), lhSHA(t, v2, true))

	i, err := Inspect(v1, nil)
	require.NoError(t, err)
	require.True(t, i.HasHeader, "the header is v1's own")
	require.Equal(t, int64(350), *i.Revision)
	require.Equal(t, int64(10), i.ForeignWrites)

	rep, err := Check(dirs, nil)
	require.ErrorIs(t, err, ErrOrderUndecided)
	require.ErrorContains(t, err, v1)
	require.Empty(t, rep.RW, "%+v", rep)
	for _, r := range rep.Replicas {
		require.Contains(t, r.Reason, "order cannot be decided", r.Dir)
		require.Contains(t, r.Reason, v1, r.Dir)
	}
	// A volume does not start on them either.
	_, err = OpenVolume(dirs, &VolumeOptions{Counter: CounterOn})
	require.ErrorIs(t, err, ErrOrderUndecided)

	// Opening v1 for writing takes it as the one holding every write: it
	// counts on from 350+10, and then Longhorn's rule and ours agree.
	o, err := Open(v1, nil)
	require.NoError(t, err)
	require.Equal(t, int64(360), o.Revision())
	require.NoError(t, o.Close())
	require.Equal(t, int64(360), lhRevision(t, v1))
	rep, err = Check(dirs, nil)
	require.NoError(t, err)
	require.Equal(t, []string{v1}, rep.RW)
	require.Equal(t, lhStart(t, true, dirs...), rep.RW)
}

// A writer killed at random points: after every completed Flush the
// directory's revision.counter (what Longhorn reads) is never below the
// writes that flush covered.
func TestKilledWriterRevisionCounterCurrent(t *testing.T) {
	if testing.Short() {
		t.Skip("re-executes the test binary")
	}
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 24))
	for rep := range 8 {
		dir := filepath.Join(t.TempDir(), "r")
		ourWrites(t, dir, CounterOn, 0)
		kill, log := runMixedChild(t, mixedChild{Dir: dir, Forever: true, Workers: 4})
		// Wait for a completed flush (a loaded machine may take long),
		// then kill it at a random point 0-100 ms later.
		for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(2 * time.Millisecond) {
			if b, _ := os.ReadFile(log); bytes.Contains(b, []byte("\nF ")) {
				break
			}
		}
		time.Sleep(time.Duration(rng.IntN(100)) * time.Millisecond)
		out := kill()
		var last int64
		for _, l := range strings.Split(out, "\n") {
			var n int64
			if _, err := fmt.Sscanf(l, "F %d", &n); err == nil {
				last = max(last, n)
			}
		}
		rc := readRC(t, dir)
		require.Positive(t, last, "rep %d: no flush completed before the kill", rep)
		require.GreaterOrEqual(t, rc, last, "rep %d: revision.counter below the last completed flush", rep)
		t.Logf("rep %d: last completed flush covered %d writes, revision.counter %d", rep, last, rc)
	}
}

// A header that is this replica's own (its head image found by inode and
// birth time) and records the counter on, with revision.counter deleted:
// damage, not a new replica. Open and Inspect fail naming the file, Check
// marks it ERR; nothing is rewritten.
func TestOwnHeaderRevisionCounterMissing(t *testing.T) {
	root := t.TempDir()
	r, sib := filepath.Join(root, "r"), filepath.Join(root, "sib")
	ourWrites(t, r, CounterOn, 5)
	ourWrites(t, sib, CounterOn, 5)
	require.NoError(t, os.Remove(filepath.Join(r, RevisionCounterFile)))
	hdr, err := os.ReadFile(filepath.Join(r, HeaderFile))
	require.NoError(t, err)
	_, err = Open(r, nil)
	require.ErrorIs(t, err, ErrCorrupt)
	require.ErrorContains(t, err, filepath.Join(r, RevisionCounterFile)+": ")
	_, err = Inspect(r, nil)
	require.ErrorIs(t, err, ErrCorrupt)
	rep, err := Check([]string{r, sib}, nil)
	require.NoError(t, err)
	require.Equal(t, []string{sib}, rep.RW)
	after, err := os.ReadFile(filepath.Join(r, HeaderFile))
	require.NoError(t, err)
	require.Equal(t, hdr, after, "replica.hdr rewritten")
	require.NotContains(t, fileNames(t, r), RevisionCounterFile)
}
