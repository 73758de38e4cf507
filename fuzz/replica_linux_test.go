package fuzz

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/sparsesync/sparsesync/internal/testutil/layout"
	"github.com/sparsesync/sparsesync/replica"
	"github.com/sparsesync/sparsesync/tcpsync"
)

// volModel is what a replica must hold after a sequence of writes: the
// bytes, and which 4 KiB blocks were ever given data (the only blocks an
// export may hold as data).
type volModel struct {
	b       []byte
	written []bool
}

func newVolModel(size int64) *volModel {
	return &volModel{b: make([]byte, size), written: make([]bool, size/4096)}
}

func (m *volModel) write(p []byte, off int64) {
	copy(m.b[off:], p)
	for blk := off / 4096; blk*4096 < off+int64(len(p)); blk++ {
		m.written[blk] = true
	}
}

// unmap is Replica.Unmap as its documentation states it: the aligned
// interior of the range becomes zeros and a hole, the partial edge blocks
// stay; with snapshots below the head nothing changes.
func (m *volModel) unmap(off, n int64, snapshots bool) {
	if snapshots {
		return
	}
	a, b := (off+4095)&^4095, (off+n)&^4095
	for p := a; p < b; p += 4096 {
		clear(m.b[p : p+4096])
		m.written[p/4096] = false
	}
}

// FuzzReplica writes a case's layout into a replica (the source layout,
// then, when the knobs say so, a snapshot, then the change script), closes
// it, and checks Export and a push of the chain (push --replica) against
// the model of the writes.
func FuzzReplica(f *testing.F) {
	srvs := startServers(f, filesystems(f))
	f.Fuzz(func(t *testing.T, in []byte) {
		c := decode(in)
		for _, srv := range srvs {
			replicaCase(t, srv, c)
		}
	})
}

func replicaCase(t *testing.T, srv server, c fcase) {
	dir := scratch(t, srv.fs)
	third := makeThird(t, dir)
	thirdBytes, err := os.ReadFile(third)
	if err != nil {
		t.Fatal(err)
	}
	size := max(4096, (c.Size+4095)&^4095)
	what := fmt.Sprintf("%s replica (size %d)\n\tcase %v", srv.fs.kind, size, c)
	r, err := replica.Create(filepath.Join(dir, "r"), size, nil)
	if err != nil {
		t.Fatalf("%s: create: %v", what, err)
	}
	m := newVolModel(size)
	snapshots := false
	run := func(ops []op) {
		for _, o := range ops {
			if o.Kind == opTrunc || o.Kind == opPrealloc || o.Off >= size {
				continue // a volume has a fixed size and no preallocation
			}
			n := min(o.Len, size-o.Off)
			var p []byte
			switch o.Kind {
			case opData:
				p = make([]byte, n)
				fill(p, o.Seed)
			case opZero:
				p = make([]byte, n)
			case opClone:
				p = thirdBytes[o.From : o.From+n]
			case opPunch:
				if err := r.Unmap(o.Off, n); err != nil {
					t.Fatalf("%s: unmap %v: %v", what, o, err)
				}
				m.unmap(o.Off, n, snapshots)
				continue
			}
			if _, err := r.WriteAt(p, o.Off); err != nil {
				t.Fatalf("%s: write %v: %v", what, o, err)
			}
			m.write(p, o.Off)
		}
	}
	run(c.Src)
	if c.Knobs&4 != 0 {
		if err := r.Snapshot("s1", nil); err != nil {
			t.Fatalf("%s: snapshot: %v", what, err)
		}
		snapshots = true
	}
	run(c.Change)
	if err := r.Close(); err != nil {
		t.Fatalf("%s: close: %v", what, err)
	}

	img := filepath.Join(dir, "export.img")
	if _, err := replica.Export(t.Context(), filepath.Join(dir, "r"), img, nil); err != nil {
		t.Fatalf("%s: export: %v", what, err)
	}
	checkVolume(t, what+": export", img, m)

	chain, err := replica.OpenChain(filepath.Join(dir, "r"))
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	defer chain.Close()
	remoteDir, err := os.MkdirTemp(srv.root, "replica-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(remoteDir) })
	rel := filepath.Join(filepath.Base(remoteDir), "vol.img")
	st, err := tcpsync.Push(t.Context(), srv.addr, chain, rel, &tcpsync.Options{NoAuth: true, MaxAttempts: 1})
	if err != nil || !st.Verified {
		t.Fatalf("%s: push --replica: %v (%+v)", what, err, st)
	}
	checkVolume(t, what+": push --replica", filepath.Join(remoteDir, "vol.img"), m)
}

// checkVolume compares an image of the volume with the model: the bytes,
// and no data in a block the writes never gave data.
func checkVolume(t *testing.T, what, path string, m *volModel) {
	t.Helper()
	checkBytes(t, what, path, m.b)
	settle(t, path)
	data := layout.SeekWalk(t, path)
	for _, d := range data {
		for blk := d.Off / 4096; blk*4096 < d.End(); blk++ {
			if !m.written[blk] {
				t.Fatalf("%s: %s has data in block %d, which no write touched (data %v)", what, path, blk, data)
			}
		}
	}
	checkAllocation(t, what, path, data, 0)
}
