// Package lhdir builds replica directories exactly as longhorn-engine's
// replica code writes them, step for step, with an independent model of
// the volume's bytes: the oracle of package replica's and replica/rebuild's
// Longhorn compatibility tests. It shares no code with package replica.
package lhdir

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Replica builds a replica directory with the file operations
// longhorn-engine's replica code performs, step for step, and keeps an
// independent model of the volume's bytes (the writes applied to a plain
// byte slice). Nothing here uses the package's writer or readers.
//
// Sources (longhorn/longhorn-engine):
//   - pkg/replica/replica.go: construct, createDisk, createNewHead,
//     linkDisk, rmDisk, revertDisk, Expand, markDiskAsRemoved,
//     encodeToFile (json.Encoder, 0666 under the umask), openFile.
//   - pkg/replica/revision_counter.go: initRevisionCounter,
//     writeRevisionCounter (4096 bytes, decimal, NUL padded, mode 0600).
//   - pkg/replica/diff_disk.go: WriteAt (aligned part straight to the
//     head, unaligned edges read-modify-write of the 4 KiB block), read
//     (past a layer's end: zeros).
//   - pkg/util/disk: expansion snapshot "expand-<size>" with label
//     "replica-expansion": "<size>".
type Replica struct {
	T        *testing.T
	Dir      string
	Size     int64
	Head     string
	Parent   string // the head's parent image
	Counter  bool
	Revision int64
	Backing  string
	// encrypted is Info.Encrypted: the engine put LUKS (dm-crypt) above the
	// replicas, so the images hold ciphertext, which the replica code
	// stores and reads like any data.
	Encrypted bool
	Model     []byte            // the volume's bytes
	Snaps     map[string][]byte // snapshot image -> volume bytes when taken
	Rng       *rand.Rand
}

// Info is replica.go's Info as encodeToFile writes it (BackingFile is
// json:"-").
type Info struct {
	Size            int64
	Head            string
	Dirty           bool
	Rebuilding      bool
	Error           string
	Parent          string
	SectorSize      int64
	BackingFilePath string
	Encrypted       bool
}

// Disk is replica.go's disk.
type Disk struct {
	Name        string
	Parent      string
	Removed     bool
	UserCreated bool
	Created     string
	Labels      map[string]string
}

// New is construct for a new directory: createDisk("000") makes
// volume-head-000.img (truncated to size) and its .meta, then, unless the
// counter is disabled, initRevisionCounter creates revision.counter = 0;
// construct ends with writeVolumeMetaData(dirty). backing, if set, is the
// raw backing file: its bytes are the volume's initial content.
func New(t *testing.T, dir string, size int64, counter bool, backing string) *Replica {
	t.Helper()
	// construct: os.Mkdir(dir, 0700), an existing directory is fine.
	if err := os.Mkdir(dir, 0o700); !os.IsExist(err) {
		require.NoError(t, err)
	}
	l := &Replica{T: t, Dir: dir, Size: size, Counter: counter, Backing: backing,
		Model: make([]byte, size), Snaps: map[string][]byte{}, Rng: rand.New(rand.NewPCG(uint64(size), 7))}
	if backing != "" {
		file := backing
		if fi, err := os.Stat(backing); err == nil && fi.IsDir() { // util.go ResolveBackingFilepath
			ents, err := os.ReadDir(backing)
			require.NoError(t, err)
			require.Len(t, ents, 1)
			file = filepath.Join(backing, ents[0].Name())
		}
		b, err := os.ReadFile(file)
		require.NoError(t, err)
		copy(l.Model, b)
	}
	l.NewHead("", "")
	if counter {
		l.WriteCounter(0)
	}
	l.WriteVolumeMeta(true)
	return l
}

func (l *Replica) Path(name string) string { return filepath.Join(l.Dir, name) }

// encode is encodeToFile: json.Encoder (trailing newline) into name.tmp,
// renamed over name; os.Create's 0666 under the umask.
func (l *Replica) Encode(name string, v any) {
	f, err := os.Create(l.Path(name + ".tmp"))
	require.NoError(l.T, err)
	require.NoError(l.T, json.NewEncoder(f).Encode(v))
	require.NoError(l.T, f.Close())
	require.NoError(l.T, os.Rename(l.Path(name+".tmp"), l.Path(name)))
}

func (l *Replica) WriteVolumeMeta(dirty bool) {
	l.Encode(volumeMetaFile, Info{Size: l.Size, Head: l.Head, Dirty: dirty, Parent: l.Parent,
		SectorSize: 512, BackingFilePath: l.Backing, Encrypted: l.Encrypted})
}

// writeCounter is writeRevisionCounter: one 4096-byte block at offset 0.
func (l *Replica) WriteCounter(n int64) {
	f, err := os.OpenFile(l.Path(revisionCounterFile), os.O_RDWR|os.O_CREATE, 0o600)
	require.NoError(l.T, err)
	b := make([]byte, 4096)
	copy(b, strconv.FormatInt(n, 10))
	_, err = f.WriteAt(b, 0)
	require.NoError(l.T, err)
	require.NoError(l.T, f.Close())
	l.Revision = n
}

// newHead is createNewHead: the next volume-head-NNN.img, truncated to the
// volume size, and its .meta {Parent, UserCreated: false}.
func (l *Replica) NewHead(oldHead, parent string) {
	idx := 0
	if oldHead != "" {
		n, ok := headIndex(oldHead)
		require.True(l.T, ok)
		idx = n + 1
	}
	name := headName(idx)
	f, err := os.OpenFile(l.Path(name), os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o666)
	require.NoError(l.T, err)
	require.NoError(l.T, f.Truncate(l.Size))
	require.NoError(l.T, f.Close())
	l.Encode(metaName(name), Disk{Name: name, Parent: parent, Created: time.Now().UTC().Format(time.RFC3339)})
	l.Head, l.Parent = name, parent
}

// write is Replica.WriteAt: diff_disk.go WriteAt puts whole 4 KiB blocks
// into the head (an unaligned edge is read through the chain, patched and
// written whole), then the revision counter goes to cache+1.
func (l *Replica) Write(off int64, p []byte) {
	copy(l.Model[off:], p)
	f, err := os.OpenFile(l.Path(l.Head), os.O_RDWR, 0)
	require.NoError(l.T, err)
	a, e := roundDown(off), roundUp(off+int64(len(p)))
	_, err = f.WriteAt(l.Model[a:e], a)
	require.NoError(l.T, err)
	require.NoError(l.T, f.Close())
	if l.Counter {
		l.WriteCounter(l.Revision + 1)
	}
}

// randomWrites makes n writes of 4 KiB, one in ten 512-byte aligned.
func (l *Replica) RandomWrites(n int) {
	for range n {
		p := make([]byte, blockSize)
		for i := range p {
			p[i] = byte(l.Rng.Uint32())
		}
		off := l.Rng.Int64N(l.Size/blockSize) * blockSize
		if l.Rng.IntN(10) == 0 {
			off = l.Rng.Int64N((l.Size-blockSize)/512) * 512
		}
		l.Write(off, p)
	}
}

// snapshot is Snapshot -> createDisk(name, userCreated, created, labels,
// size): new head (parent: the snapshot), hard links of the old head and
// its .meta to volume-snap-NAME.img(.meta), volume.meta, the snapshot's
// .meta rewritten from the old head's disk with UserCreated, Created and
// Labels (Name stays the old head's), rmDisk(old head).
func (l *Replica) Snapshot(name string, userCreated bool, labels map[string]string, size int64) {
	old, oldParent := l.Head, l.Parent
	snap := snapshotName(name)
	l.Size = size
	l.NewHead(old, snap)
	require.NoError(l.T, os.Link(l.Path(old), l.Path(snap)))
	require.NoError(l.T, os.Link(l.Path(metaName(old)), l.Path(metaName(snap))))
	l.WriteVolumeMeta(true)
	l.Encode(metaName(snap), Disk{Name: old, Parent: oldParent, UserCreated: userCreated,
		Created: time.Now().UTC().Format(time.RFC3339), Labels: labels})
	require.NoError(l.T, os.Remove(l.Path(old)))
	require.NoError(l.T, os.Remove(l.Path(metaName(old))))
	l.Snaps[snap] = append([]byte(nil), l.Model...)
}

// revert is revertDisk: a new head whose parent is the snapshot,
// volume.meta, rmDisk(old head). The snapshots above the target stay.
func (l *Replica) Revert(name string) {
	snap := snapshotName(name)
	old := l.Head
	l.NewHead(old, snap)
	l.WriteVolumeMeta(true)
	require.NoError(l.T, os.Remove(l.Path(old)))
	require.NoError(l.T, os.Remove(l.Path(metaName(old))))
	l.Model = append([]byte(nil), l.Snaps[snap]...)
}

// expand is Expand(size): createDisk(GenerateExpansionSnapshotName(size),
// false, now, GenerateExpansionSnapshotLabels(size), size); the older
// layers keep their size and the new tail reads as zeros.
func (l *Replica) Expand(size int64) {
	l.Snapshot(fmt.Sprintf("expand-%d", size), false, map[string]string{"replica-expansion": strconv.FormatInt(size, 10)}, size)
	l.Model = append(l.Model, make([]byte, size-int64(len(l.Model)))...)
}

// markRemoved is markDiskAsRemoved: the .meta rewritten with Removed.
func (l *Replica) MarkRemoved(name string) {
	snap := snapshotName(name)
	b, err := os.ReadFile(l.Path(metaName(snap)))
	require.NoError(l.T, err)
	var d Disk
	require.NoError(l.T, json.Unmarshal(b, &d))
	d.Removed = true
	l.Encode(metaName(snap), d)
}

// close is Close -> writeVolumeMetaData(false).
func (l *Replica) Close() { l.WriteVolumeMeta(false) }

// sha is the SHA-256 of the model.
func (l *Replica) SHA() [32]byte { return sha256.Sum256(l.Model) }

// StartCheck is what pkg/controller/control.go decides at start
// with the revision counter enabled (checkReplicasRevisionCounter): each
// replica's count is its revision.counter file (GetRevisionCounter is the
// cache initRevisionCounter loaded from it; replica.hdr is not read), the
// highest count stays RW and every replica with another count is ERR.
func StartCheck(t *testing.T, dirs []string) []string {
	t.Helper()
	counts := make([]int64, len(dirs))
	for i, d := range dirs {
		b, err := os.ReadFile(filepath.Join(d, revisionCounterFile))
		require.NoError(t, err)
		counts[i], err = parseRevisionCounter(b)
		require.NoError(t, err)
	}
	return KeepHighest(dirs, counts)
}

// KeepHighest is checkReplicasRevisionCounter's verdict (control.go): the
// replicas whose count equals the highest stay RW, the others are ERR.
func KeepHighest(dirs []string, counts []int64) []string {
	top := slices.Max(counts)
	var rw []string
	for i, d := range dirs {
		if counts[i] == top {
			rw = append(rw, d)
		}
	}
	return rw
}

// Open is construct on an existing directory (readMetadata, then
// initRevisionCounter loads revision.counter into the cache), with model
// the volume's bytes as the caller knows them.
func Open(t *testing.T, dir string, model []byte) *Replica {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, volumeMetaFile))
	require.NoError(t, err)
	var info Info
	require.NoError(t, json.Unmarshal(b, &info))
	l := &Replica{T: t, Dir: dir, Size: info.Size, Head: info.Head, Parent: info.Parent, Backing: info.BackingFilePath,
		Model: append([]byte(nil), model...), Snaps: map[string][]byte{}, Rng: rand.New(rand.NewPCG(uint64(info.Size), 11))}
	if rc, err := os.ReadFile(filepath.Join(dir, revisionCounterFile)); err == nil {
		l.Counter = true
		l.Revision, err = parseRevisionCounter(rc)
		require.NoError(t, err)
	}
	l.WriteVolumeMeta(true)
	return l
}

// Delete is Replica.Delete on the replica in Dir: rmDisk (image,
// .meta, .checksum) for every disk readMetadata listed (every image
// .meta), then volume.meta and revision.counter. Nothing else goes: our
// replica.hdr and live.counter stay.
func Delete(t *testing.T, dir string) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	require.NoError(t, err)
	for _, e := range ents {
		img, ok := strings.CutSuffix(e.Name(), ".meta")
		if !ok || e.Name() == volumeMetaFile {
			continue
		}
		for _, n := range []string{img, img + ".meta", img + ".checksum"} {
			require.NoError(t, os.RemoveAll(filepath.Join(dir, n)))
		}
	}
	for _, n := range []string{volumeMetaFile, revisionCounterFile} {
		require.NoError(t, os.Remove(filepath.Join(dir, n)))
	}
}

// The file names and sizes of Longhorn's layout, written here from its
// source, not taken from package replica.
const (
	blockSize           = 4096
	volumeMetaFile      = "volume.meta"
	revisionCounterFile = "revision.counter"
)

func headName(n int) string           { return fmt.Sprintf("volume-head-%03d.img", n) }
func snapshotName(name string) string { return "volume-snap-" + name + ".img" }
func metaName(img string) string      { return img + ".meta" }

// headIndex parses volume-head-NNN.img.
func headIndex(img string) (int, bool) {
	s, ok := strings.CutPrefix(img, "volume-head-")
	if !ok {
		return 0, false
	}
	s, ok = strings.CutSuffix(s, ".img")
	if !ok || len(s) != 3 {
		return 0, false
	}
	n, err := strconv.Atoi(s)
	return n, err == nil
}

func roundDown(x int64) int64 { return x &^ (blockSize - 1) }
func roundUp(x int64) int64   { return (x + blockSize - 1) &^ (blockSize - 1) }

// parseRevisionCounter reads revision.counter as Longhorn does
// (revision_counter.go: decimal, NUL padded).
func parseRevisionCounter(b []byte) (int64, error) {
	return strconv.ParseInt(strings.TrimRight(string(b), "\x00"), 10, 64)
}

// WriteDir builds, by hand, a replica directory exactly as Longhorn
// writes it: one snapshot and a head, revision.counter, no replica.hdr.
func WriteDir(t *testing.T, dir string, counter int64, headData, snapData map[int64]byte) {
	t.Helper()
	require.NoError(t, os.MkdirAll(dir, 0o700))
	const size = 1 << 20
	write := func(name, s string) { require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(s), 0o600)) }
	img := func(name string, data map[int64]byte) {
		f, err := os.Create(filepath.Join(dir, name))
		require.NoError(t, err)
		require.NoError(t, f.Truncate(size))
		for off, c := range data {
			_, err := f.WriteAt(bytes.Repeat([]byte{c}, blockSize), off)
			require.NoError(t, err)
		}
		require.NoError(t, f.Close())
	}
	write("volume.meta", `{"Size":1048576,"Head":"volume-head-002.img","Dirty":true,"Rebuilding":false,"Error":"","Parent":"volume-snap-c8e2b5ce-3a5a-4c5f-a3f0-5c2f1b9d7e61.img","SectorSize":512,"BackingFilePath":""}`)
	img("volume-head-002.img", headData)
	write("volume-head-002.img.meta", `{"Name":"volume-head-002.img","Parent":"volume-snap-c8e2b5ce-3a5a-4c5f-a3f0-5c2f1b9d7e61.img","Removed":false,"UserCreated":false,"Created":"2024-05-02T10:11:12Z","Labels":null}`)
	img("volume-snap-c8e2b5ce-3a5a-4c5f-a3f0-5c2f1b9d7e61.img", snapData)
	write("volume-snap-c8e2b5ce-3a5a-4c5f-a3f0-5c2f1b9d7e61.img.meta", `{"Name":"volume-snap-c8e2b5ce-3a5a-4c5f-a3f0-5c2f1b9d7e61.img","Parent":"","Removed":false,"UserCreated":true,"Created":"2024-05-01T09:00:00Z","Labels":{"app":"db"}}`)
	if counter >= 0 {
		write("revision.counter", string(formatRevisionCounter(counter)))
	}
}

// formatRevisionCounter is revision_counter.go's writeRevisionCounter
// content: the decimal count, NUL padded to 4096 bytes.
func formatRevisionCounter(n int64) []byte {
	b := make([]byte, 4096)
	copy(b, strconv.FormatInt(n, 10))
	return b
}
