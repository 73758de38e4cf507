package replica

import (
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

// lhReplica builds a replica directory with the file operations
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
type lhReplica struct {
	t        *testing.T
	dir      string
	size     int64
	head     string
	parent   string // the head's parent image
	counter  bool
	revision int64
	backing  string
	// encrypted is Info.Encrypted: the engine put LUKS (dm-crypt) above the
	// replicas, so the images hold ciphertext, which the replica code
	// stores and reads like any data.
	encrypted bool
	model     []byte            // the volume's bytes
	snaps     map[string][]byte // snapshot image -> volume bytes when taken
	rng       *rand.Rand
}

// lhInfo is replica.go's Info as encodeToFile writes it (BackingFile is
// json:"-").
type lhInfo struct {
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

// lhDisk is replica.go's disk.
type lhDisk struct {
	Name        string
	Parent      string
	Removed     bool
	UserCreated bool
	Created     string
	Labels      map[string]string
}

// newLonghorn is construct for a new directory: createDisk("000") makes
// volume-head-000.img (truncated to size) and its .meta, then, unless the
// counter is disabled, initRevisionCounter creates revision.counter = 0;
// construct ends with writeVolumeMetaData(dirty). backing, if set, is the
// raw backing file: its bytes are the volume's initial content.
func newLonghorn(t *testing.T, dir string, size int64, counter bool, backing string) *lhReplica {
	t.Helper()
	// construct: os.Mkdir(dir, 0700), an existing directory is fine.
	if err := os.Mkdir(dir, 0o700); !os.IsExist(err) {
		require.NoError(t, err)
	}
	l := &lhReplica{t: t, dir: dir, size: size, counter: counter, backing: backing,
		model: make([]byte, size), snaps: map[string][]byte{}, rng: rand.New(rand.NewPCG(uint64(size), 7))}
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
		copy(l.model, b)
	}
	l.newHead("", "")
	if counter {
		l.writeCounter(0)
	}
	l.writeVolumeMeta(true)
	return l
}

func (l *lhReplica) path(name string) string { return filepath.Join(l.dir, name) }

// encode is encodeToFile: json.Encoder (trailing newline) into name.tmp,
// renamed over name; os.Create's 0666 under the umask.
func (l *lhReplica) encode(name string, v any) {
	f, err := os.Create(l.path(name + ".tmp"))
	require.NoError(l.t, err)
	require.NoError(l.t, json.NewEncoder(f).Encode(v))
	require.NoError(l.t, f.Close())
	require.NoError(l.t, os.Rename(l.path(name+".tmp"), l.path(name)))
}

func (l *lhReplica) writeVolumeMeta(dirty bool) {
	l.encode(VolumeMetaFile, lhInfo{Size: l.size, Head: l.head, Dirty: dirty, Parent: l.parent,
		SectorSize: 512, BackingFilePath: l.backing, Encrypted: l.encrypted})
}

// writeCounter is writeRevisionCounter: one 4096-byte block at offset 0.
func (l *lhReplica) writeCounter(n int64) {
	f, err := os.OpenFile(l.path(RevisionCounterFile), os.O_RDWR|os.O_CREATE, 0o600)
	require.NoError(l.t, err)
	b := make([]byte, 4096)
	copy(b, strconv.FormatInt(n, 10))
	_, err = f.WriteAt(b, 0)
	require.NoError(l.t, err)
	require.NoError(l.t, f.Close())
	l.revision = n
}

// newHead is createNewHead: the next volume-head-NNN.img, truncated to the
// volume size, and its .meta {Parent, UserCreated: false}.
func (l *lhReplica) newHead(oldHead, parent string) {
	idx := 0
	if oldHead != "" {
		n, ok := headIndex(oldHead)
		require.True(l.t, ok)
		idx = n + 1
	}
	name := HeadName(idx)
	f, err := os.OpenFile(l.path(name), os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o666)
	require.NoError(l.t, err)
	require.NoError(l.t, f.Truncate(l.size))
	require.NoError(l.t, f.Close())
	l.encode(MetaName(name), lhDisk{Name: name, Parent: parent, Created: time.Now().UTC().Format(time.RFC3339)})
	l.head, l.parent = name, parent
}

// write is Replica.WriteAt: diff_disk.go WriteAt puts whole 4 KiB blocks
// into the head (an unaligned edge is read through the chain, patched and
// written whole), then the revision counter goes to cache+1.
func (l *lhReplica) write(off int64, p []byte) {
	copy(l.model[off:], p)
	f, err := os.OpenFile(l.path(l.head), os.O_RDWR, 0)
	require.NoError(l.t, err)
	a, e := roundDown(off), roundUp(off+int64(len(p)))
	_, err = f.WriteAt(l.model[a:e], a)
	require.NoError(l.t, err)
	require.NoError(l.t, f.Close())
	if l.counter {
		l.writeCounter(l.revision + 1)
	}
}

// randomWrites makes n writes of 4 KiB, one in ten 512-byte aligned.
func (l *lhReplica) randomWrites(n int) {
	for range n {
		p := make([]byte, BlockSize)
		for i := range p {
			p[i] = byte(l.rng.Uint32())
		}
		off := l.rng.Int64N(l.size/BlockSize) * BlockSize
		if l.rng.IntN(10) == 0 {
			off = l.rng.Int64N((l.size-BlockSize)/512) * 512
		}
		l.write(off, p)
	}
}

// snapshot is Snapshot -> createDisk(name, userCreated, created, labels,
// size): new head (parent: the snapshot), hard links of the old head and
// its .meta to volume-snap-NAME.img(.meta), volume.meta, the snapshot's
// .meta rewritten from the old head's disk with UserCreated, Created and
// Labels (Name stays the old head's), rmDisk(old head).
func (l *lhReplica) snapshot(name string, userCreated bool, labels map[string]string, size int64) {
	old, oldParent := l.head, l.parent
	snap := SnapshotName(name)
	l.size = size
	l.newHead(old, snap)
	require.NoError(l.t, os.Link(l.path(old), l.path(snap)))
	require.NoError(l.t, os.Link(l.path(MetaName(old)), l.path(MetaName(snap))))
	l.writeVolumeMeta(true)
	l.encode(MetaName(snap), lhDisk{Name: old, Parent: oldParent, UserCreated: userCreated,
		Created: time.Now().UTC().Format(time.RFC3339), Labels: labels})
	require.NoError(l.t, os.Remove(l.path(old)))
	require.NoError(l.t, os.Remove(l.path(MetaName(old))))
	l.snaps[snap] = append([]byte(nil), l.model...)
}

// revert is revertDisk: a new head whose parent is the snapshot,
// volume.meta, rmDisk(old head). The snapshots above the target stay.
func (l *lhReplica) revert(name string) {
	snap := SnapshotName(name)
	old := l.head
	l.newHead(old, snap)
	l.writeVolumeMeta(true)
	require.NoError(l.t, os.Remove(l.path(old)))
	require.NoError(l.t, os.Remove(l.path(MetaName(old))))
	l.model = append([]byte(nil), l.snaps[snap]...)
}

// expand is Expand(size): createDisk(GenerateExpansionSnapshotName(size),
// false, now, GenerateExpansionSnapshotLabels(size), size); the older
// layers keep their size and the new tail reads as zeros.
func (l *lhReplica) expand(size int64) {
	l.snapshot(fmt.Sprintf("expand-%d", size), false, map[string]string{"replica-expansion": strconv.FormatInt(size, 10)}, size)
	l.model = append(l.model, make([]byte, size-int64(len(l.model)))...)
}

// markRemoved is markDiskAsRemoved: the .meta rewritten with Removed.
func (l *lhReplica) markRemoved(name string) {
	snap := SnapshotName(name)
	b, err := os.ReadFile(l.path(MetaName(snap)))
	require.NoError(l.t, err)
	var d lhDisk
	require.NoError(l.t, json.Unmarshal(b, &d))
	d.Removed = true
	l.encode(MetaName(snap), d)
}

// close is Close -> writeVolumeMetaData(false).
func (l *lhReplica) close() { l.writeVolumeMeta(false) }

// sha is the SHA-256 of the model.
func (l *lhReplica) sha() [32]byte { return sha256.Sum256(l.model) }

// exportSHA exports dir with Export and hashes the image.
func exportSHA(t *testing.T, dir string) [32]byte {
	t.Helper()
	return sha256.Sum256(exportBytes(t, dir))
}

// longhornStartCheck is what pkg/controller/control.go decides at start
// with the revision counter enabled (checkReplicasRevisionCounter): each
// replica's count is its revision.counter file (GetRevisionCounter is the
// cache initRevisionCounter loaded from it; replica.hdr is not read), the
// highest count stays RW and every replica with another count is ERR.
func longhornStartCheck(t *testing.T, dirs []string) []string {
	t.Helper()
	counts := make([]int64, len(dirs))
	for i, d := range dirs {
		b, err := os.ReadFile(filepath.Join(d, RevisionCounterFile))
		require.NoError(t, err)
		counts[i], err = ParseRevisionCounter(b)
		require.NoError(t, err)
	}
	return keepHighest(dirs, counts)
}

// keepHighest is checkReplicasRevisionCounter's verdict (control.go): the
// replicas whose count equals the highest stay RW, the others are ERR.
func keepHighest(dirs []string, counts []int64) []string {
	top := slices.Max(counts)
	var rw []string
	for i, d := range dirs {
		if counts[i] == top {
			rw = append(rw, d)
		}
	}
	return rw
}

// openLonghorn is construct on an existing directory (readMetadata, then
// initRevisionCounter loads revision.counter into the cache), with model
// the volume's bytes as the caller knows them.
func openLonghorn(t *testing.T, dir string, model []byte) *lhReplica {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, VolumeMetaFile))
	require.NoError(t, err)
	var info lhInfo
	require.NoError(t, json.Unmarshal(b, &info))
	l := &lhReplica{t: t, dir: dir, size: info.Size, head: info.Head, parent: info.Parent, backing: info.BackingFilePath,
		model: append([]byte(nil), model...), snaps: map[string][]byte{}, rng: rand.New(rand.NewPCG(uint64(info.Size), 11))}
	if rc, err := os.ReadFile(filepath.Join(dir, RevisionCounterFile)); err == nil {
		l.counter = true
		l.revision, err = ParseRevisionCounter(rc)
		require.NoError(t, err)
	}
	l.writeVolumeMeta(true)
	return l
}

// deleteLonghorn is Replica.Delete on the replica in dir: rmDisk (image,
// .meta, .checksum) for every disk readMetadata listed (every image
// .meta), then volume.meta and revision.counter. Nothing else goes: our
// replica.hdr and live.counter stay.
func deleteLonghorn(t *testing.T, dir string) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	require.NoError(t, err)
	for _, e := range ents {
		img, ok := strings.CutSuffix(e.Name(), ".meta")
		if !ok || e.Name() == VolumeMetaFile {
			continue
		}
		for _, n := range []string{img, img + ".meta", img + ".checksum"} {
			require.NoError(t, os.RemoveAll(filepath.Join(dir, n)))
		}
	}
	for _, n := range []string{VolumeMetaFile, RevisionCounterFile} {
		require.NoError(t, os.Remove(filepath.Join(dir, n)))
	}
}
