package replica

import (
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sparsesync/sparsesync/internal/target"
	"github.com/sparsesync/sparsesync/internal/testutil/lhdir"

	"github.com/sparsesync/sparsesync/internal/testutil/loopfs"
)

// spec describes one replica directory built from real files.
type spec struct {
	name    string
	mode    CounterMode
	blocks  int           // 4 KiB blocks written (allocated in the head)
	punch   int           // of those, blocks punched again (allocation drops)
	extra   int           // further counted writes (rewrites of block 0)
	mtime   time.Duration // head mtime relative to the base time
	epoch   uint64
	garbage string // content to put in revision.counter afterwards
	noMeta  bool   // delete volume.meta
	alien   bool   // member of another volume
	size    int64  // volume size (default 1 MiB)
}

var base = time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)

func build(t *testing.T, root string, s spec, vol ID) string {
	t.Helper()
	dir := filepath.Join(root, s.name)
	if s.alien {
		vol = newID()
	}
	size := s.size
	if size == 0 {
		size = 1 << 20
	}
	r, err := create(dir, size, Options{Counter: s.mode}, vol)
	require.NoError(t, err)
	b := alignedBuf(BlockSize)
	for i := range s.blocks {
		b[0] = byte(i + 1)
		_, err := r.WriteAt(b, int64(i)*BlockSize)
		require.NoError(t, err)
	}
	for range s.extra {
		_, err := r.WriteAt(b, 0)
		require.NoError(t, err)
	}
	if s.punch > 0 {
		require.NoError(t, r.Unmap(0, int64(s.punch)*BlockSize))
	}
	if s.epoch > 0 {
		require.NoError(t, r.SetEpoch(s.epoch))
	}
	require.NoError(t, r.Close())
	head := filepath.Join(dir, HeadName(0))
	st, err := os.Stat(head)
	require.NoError(t, err)
	require.Equal(t, size, st.Size())
	mt := base.Add(s.mtime)
	require.NoError(t, os.Chtimes(head, mt, mt))
	if s.garbage != "" {
		require.NoError(t, os.WriteFile(filepath.Join(dir, RevisionCounterFile), []byte(s.garbage), 0o600))
	}
	if s.noMeta {
		require.NoError(t, os.Remove(filepath.Join(dir, VolumeMetaFile)))
	}
	return dir
}

func TestCheckTable(t *testing.T) {
	on, off := true, false
	type want struct {
		rw     []string
		reason map[string]string // substring of the reason of ERR replicas
		err    error
	}
	cases := []struct {
		name    string
		specs   []spec
		counter *bool
		salvage bool
		want    want
	}{
		{
			name: "salvage/exactly 5s older is out",
			specs: []spec{
				{name: "a", mode: CounterOff, blocks: 1, mtime: 0},
				{name: "b", mode: CounterOff, blocks: 10, mtime: -5 * time.Second},
			},
			counter: &off, salvage: true,
			want: want{rw: []string{"a"}, reason: map[string]string{"b": "5s before the newest"}},
		},
		{
			name: "salvage/just inside the window, more blocks wins",
			specs: []spec{
				{name: "a", mode: CounterOff, blocks: 1, mtime: 0},
				{name: "b", mode: CounterOff, blocks: 10, mtime: -5*time.Second + time.Nanosecond},
			},
			counter: &off, salvage: true,
			want: want{rw: []string{"b"}, reason: map[string]string{"a": "salvage: "}},
		},
		{
			name: "salvage/allocation tie goes to later mtime",
			specs: []spec{
				{name: "a", mode: CounterOff, blocks: 4, mtime: -time.Second},
				{name: "b", mode: CounterOff, blocks: 4, mtime: 0},
				{name: "c", mode: CounterOff, blocks: 4, mtime: -2 * time.Second},
			},
			counter: &off, salvage: true,
			// The times in the reason are dates a person can read.
			want: want{rw: []string{"b"}, reason: map[string]string{
				"a": "head modified 2026-11-01 12:00:00.000000000 UTC vs 2026-11-01 11:59:59.000000000 UTC",
				"c": "head modified 2026-11-01 12:00:00.000000000 UTC vs 2026-11-01 11:59:58.000000000 UTC"}},
		},
		{
			name: "salvage/full tie goes to the lowest path",
			specs: []spec{
				{name: "c", mode: CounterOff, blocks: 4},
				{name: "a", mode: CounterOff, blocks: 4},
				{name: "b", mode: CounterOff, blocks: 4},
			},
			counter: &off, salvage: true,
			want: want{rw: []string{"a"}},
		},
		{
			name: "salvage/allocated not apparent size",
			// a wrote 8 blocks then punched 6: same apparent size,
			// 2 blocks allocated; b has 3 allocated and wins.
			specs: []spec{
				{name: "a", mode: CounterOff, blocks: 8, punch: 6, mtime: 0},
				{name: "b", mode: CounterOff, blocks: 3, mtime: -time.Second},
			},
			counter: &off, salvage: true,
			want: want{rw: []string{"b"}},
		},
		{
			name: "salvage/ERR replicas are not in the window",
			// c has the newest mtime but a lower epoch: were it counted,
			// a and b (10 s older) would both be out.
			specs: []spec{
				{name: "a", mode: CounterOff, blocks: 2, mtime: 0, epoch: 1},
				{name: "b", mode: CounterOff, blocks: 3, mtime: -time.Second, epoch: 1},
				{name: "c", mode: CounterOff, blocks: 9, mtime: 10 * time.Second},
			},
			counter: &off, salvage: true,
			want: want{rw: []string{"b"}, reason: map[string]string{"c": "epoch 0 below 1"}},
		},
		{
			name: "salvage/broken metadata is ERR",
			specs: []spec{
				{name: "a", mode: CounterOff, blocks: 2, mtime: 0},
				{name: "b", mode: CounterOff, blocks: 9, mtime: 0, noMeta: true},
			},
			counter: &off, salvage: true,
			want: want{rw: []string{"a"}, reason: map[string]string{"b": "not a replica directory"}},
		},
		{
			name: "off/no salvage keeps all RW",
			specs: []spec{
				{name: "a", mode: CounterOff, blocks: 1, mtime: 0},
				{name: "b", mode: CounterOff, blocks: 9, mtime: -time.Hour},
			},
			counter: &off,
			want:    want{rw: []string{"a", "b"}},
		},
		{
			name: "off/no salvage, lower epoch is ERR",
			specs: []spec{
				{name: "a", mode: CounterOff, blocks: 1, epoch: 3},
				{name: "b", mode: CounterOff, blocks: 9, epoch: 2},
				{name: "c", mode: CounterOff, blocks: 1, epoch: 3},
			},
			counter: &off,
			want:    want{rw: []string{"a", "c"}, reason: map[string]string{"b": "epoch 2 below 3"}},
		},
		{
			name: "on/counter below the highest is ERR",
			specs: []spec{
				{name: "a", blocks: 5},
				{name: "b", blocks: 5},
				{name: "c", blocks: 3, mtime: time.Hour},
			},
			counter: &on,
			want:    want{rw: []string{"a", "b"}, reason: map[string]string{"c": "revision 3 below 5"}},
		},
		{
			name: "on/counts unmaps and rewrites, not blocks",
			specs: []spec{
				{name: "a", blocks: 2, extra: 3}, // 5 ops
				{name: "b", blocks: 4, punch: 1}, // 5 ops
				{name: "c", blocks: 4},           // 4 ops
			},
			counter: &on,
			want:    want{rw: []string{"a", "b"}, reason: map[string]string{"c": "revision 4 below 5"}},
		},
		{
			name: "on/garbage counter file is ERR",
			specs: []spec{
				{name: "a", blocks: 5},
				{name: "b", blocks: 9, garbage: "12x\x00"},
				{name: "c", blocks: 9, garbage: "\x00\x00"},
			},
			counter: &on,
			want:    want{rw: []string{"a"}, reason: map[string]string{"b": "not a decimal counter", "c": "empty counter"}},
		},
		{
			name: "on/mode mismatch is ERR",
			specs: []spec{
				{name: "a", blocks: 1},
				{name: "b", mode: CounterOff, blocks: 9},
			},
			counter: &on,
			want:    want{rw: []string{"a"}, reason: map[string]string{"b": "revision counter off, volume has it on"}},
		},
		{
			name: "auto/majority mode",
			specs: []spec{
				{name: "a", mode: CounterOff, blocks: 1},
				{name: "b", mode: CounterOff, blocks: 1},
				{name: "c", blocks: 1},
			},
			want: want{rw: []string{"a", "b"}, reason: map[string]string{"c": "revision counter on, volume has it off"}},
		},
		{
			name: "on/replica of another volume is ERR",
			specs: []spec{
				{name: "a", blocks: 1},
				{name: "b", blocks: 1},
				{name: "c", blocks: 9, alien: true},
			},
			counter: &on,
			want:    want{rw: []string{"a", "b"}, reason: map[string]string{"c": "belongs to volume"}},
		},
		{
			name: "on/replicas created one by one are one volume",
			specs: []spec{
				{name: "a", blocks: 1, alien: true},
				{name: "b", blocks: 1, alien: true},
			},
			counter: &on,
			want:    want{rw: []string{"a", "b"}},
		},
		{
			name: "on/other size is ERR",
			specs: []spec{
				{name: "a", blocks: 1},
				{name: "b", blocks: 1},
				{name: "c", blocks: 9, size: 2 << 20},
			},
			counter: &on,
			want:    want{rw: []string{"a", "b"}, reason: map[string]string{"c": "size 2097152 differs from the volume's 1048576"}},
		},
		{
			name: "on/all ERR fails",
			specs: []spec{
				{name: "a", blocks: 1, garbage: "x"},
				{name: "b", mode: CounterOff, blocks: 1},
			},
			counter: &on,
			want:    want{err: ErrNoHealthyReplica},
		},
	}
	loopfs.Run(t, 512<<20, func(t *testing.T, kind loopfs.Kind, mnt string) {
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				root, err := os.MkdirTemp(mnt, "case")
				require.NoError(t, err)
				vol := newID()
				var dirs []string
				for _, s := range tc.specs {
					dirs = append(dirs, build(t, root, s, vol))
				}
				opts := CheckOptions{Counter: tc.counter, Salvage: tc.salvage}
				before := dirStates(t, dirs)
				rep, err := Check(dirs, &opts)
				require.Equal(t, before, dirStates(t, dirs), "the check only reads")
				if tc.want.err != nil {
					require.ErrorIs(t, err, tc.want.err)
					for _, r := range rep.Replicas {
						require.Equal(t, ModeERR, r.Mode)
					}
					return
				}
				require.NoError(t, err)
				var rw []string
				for _, d := range rep.RW {
					rw = append(rw, filepath.Base(d))
				}
				slices.Sort(rw)
				require.Equal(t, tc.want.rw, rw)
				for _, r := range rep.Replicas {
					if r.Mode == ModeERR {
						require.Contains(t, r.Reason, tc.want.reason[filepath.Base(r.Dir)], "%s", r.Dir)
					}
					require.NotEmpty(t, r.Reason)
				}
				// Same input in any order: same answer.
				rev := slices.Clone(dirs)
				slices.Reverse(rev)
				rep2, err := Check(rev, &opts)
				require.NoError(t, err)
				require.ElementsMatch(t, rep.RW, rep2.RW)
			})
		}
	})
}

// dirStates describes every file of the directories: name, size, mtime
// and a hash of the content.
func dirStates(t *testing.T, dirs []string) string {
	t.Helper()
	var b strings.Builder
	for _, d := range dirs {
		entries, err := os.ReadDir(d)
		if os.IsNotExist(err) {
			continue
		}
		require.NoError(t, err)
		for _, e := range entries {
			fi, err := e.Info()
			require.NoError(t, err)
			data, err := os.ReadFile(filepath.Join(d, e.Name()))
			require.NoError(t, err)
			fmt.Fprintf(&b, "%s/%s %d %d %x\n", d, e.Name(), fi.Size(), fi.ModTime().UnixNano(), crc32.ChecksumIEEE(data))
		}
	}
	return b.String()
}

func TestLiveCounterAndReboot(t *testing.T) {
	dir := t.TempDir()
	r, err := Create(dir, 1<<20, nil)
	require.NoError(t, err)
	b := alignedBuf(BlockSize)
	for i := range 5 {
		_, err := r.WriteAt(b, int64(i)*BlockSize)
		require.NoError(t, err)
	}
	require.NoError(t, r.Flush())
	// The header writer records the flushed count shortly after.
	other := newID()
	var info Info
	require.Eventually(t, func() bool {
		info, err = Inspect(dir, &InspectOptions{BootID: &other})
		return err == nil && *info.Revision == 5
	}, 5*time.Second, time.Millisecond)
	r.hwWG.Wait()
	for range 3 {
		_, err := r.WriteAt(b, 0)
		require.NoError(t, err)
	}
	// As after a kill -9: the live page (page cache) has 8, the last
	// flush persisted 5.
	info, err = Inspect(dir, nil)
	require.NoError(t, err)
	require.Equal(t, int64(8), *info.Revision)
	info, err = Inspect(dir, &InspectOptions{BootID: &other})
	require.NoError(t, err)
	require.Equal(t, int64(5), *info.Revision, "after a reboot only the flushed count counts")
	require.NoError(t, r.Close())
	info, err = Inspect(dir, &InspectOptions{BootID: &other})
	require.NoError(t, err)
	require.Equal(t, int64(8), *info.Revision)
}

func TestVolumeDemotesFailedReplica(t *testing.T) {
	for _, mode := range []CounterMode{CounterOff, CounterOn} {
		t.Run(mode.String(), func(t *testing.T) {
			root := t.TempDir()
			dirs := []string{filepath.Join(root, "r0"), filepath.Join(root, "r1"), filepath.Join(root, "r2")}
			failing := false
			injected := errors.New("injected EIO")
			opts := VolumeOptions{Counter: mode, Replica: Options{faults: target.NewFaults(target.Fault{
				Op: target.OpWrite, Path: filepath.Join(dirs[1], "*"), When: func() bool { return failing }, Err: injected})}}
			v, err := CreateVolume(dirs, 1<<20, &opts)
			require.NoError(t, err)
			b := alignedBuf(BlockSize)
			_, err = v.WriteAt(b, 0)
			require.NoError(t, err)
			failing = true
			_, err = v.WriteAt(b, BlockSize)
			require.NoError(t, err, "two replicas completed the write")
			require.Equal(t, uint64(1), v.Epoch())
			m := v.Members()
			require.Equal(t, ModeERR, m[1].Mode)
			require.Contains(t, m[1].Reason, "injected EIO")
			copy(b, "after demotion")
			_, err = v.WriteAt(b, 2*BlockSize)
			require.NoError(t, err)
			got := make([]byte, 20)
			_, err = v.ReadAt(got, 2*BlockSize)
			require.NoError(t, err)
			require.Equal(t, "after demotion", string(got[:14]))
			require.NoError(t, v.Snapshot("s1", nil))
			require.NoError(t, v.Unmap(0, BlockSize))
			require.NoError(t, v.Flush())
			require.NoError(t, v.Close())
			_, err = v.WriteAt(b, 0)
			require.ErrorIs(t, err, ErrClosed)
			for _, d := range []string{dirs[0], dirs[2]} {
				info, err := Inspect(d, nil)
				require.NoError(t, err)
				require.Equal(t, []string{"volume-head-001.img", "volume-snap-s1.img"}, info.Chain)
				require.Equal(t, uint64(1), info.Epoch)
				if mode.Enabled() {
					require.Equal(t, int64(4), *info.Revision, "3 writes and 1 unmap")
				}
			}

			// Counter off, no salvage: Longhorn would take r1 back as
			// RW; its lower epoch gives it away.
			v, err = OpenVolume(dirs, &VolumeOptions{Counter: mode})
			require.NoError(t, err)
			m = v.Members()
			require.Equal(t, []string{ModeRW, ModeERR, ModeRW}, []string{m[0].Mode, m[1].Mode, m[2].Mode})
			require.Contains(t, m[1].Reason, "epoch 0 below 1")
			require.NoError(t, v.Close())
		})
	}
}

// The check on directories Longhorn wrote (no replica.hdr).
func TestCheckLonghornDirectories(t *testing.T) {
	root := t.TempDir()
	a, b, c := filepath.Join(root, "a"), filepath.Join(root, "b"), filepath.Join(root, "c")
	lhdir.WriteDir(t, a, 42, map[int64]byte{0: 'h'}, nil)
	lhdir.WriteDir(t, b, 41, map[int64]byte{0: 'h'}, nil)
	lhdir.WriteDir(t, c, 42, map[int64]byte{0: 'h', 4096: 'i'}, nil)
	rep, err := Check([]string{a, b, c}, nil)
	require.NoError(t, err)
	require.True(t, rep.CounterEnabled, "revision.counter present: counter on")
	require.Equal(t, []string{a, c}, rep.RW)
	require.Contains(t, rep.Replicas[1].Reason, "revision 41 below 42")

	// Counter disabled (no revision.counter), salvage by mtime and blocks.
	d, e := filepath.Join(root, "d"), filepath.Join(root, "e")
	lhdir.WriteDir(t, d, -1, map[int64]byte{0: 'h'}, nil)
	lhdir.WriteDir(t, e, -1, map[int64]byte{0: 'h', 4096: 'i'}, nil)
	for _, x := range []struct {
		dir string
		age time.Duration
	}{{d, 0}, {e, 4 * time.Second}} {
		mt := base.Add(-x.age)
		require.NoError(t, os.Chtimes(filepath.Join(x.dir, "volume-head-002.img"), mt, mt))
	}
	rep, err = Check([]string{d, e}, &CheckOptions{Salvage: true})
	require.NoError(t, err)
	require.False(t, rep.CounterEnabled)
	require.Equal(t, []string{e}, rep.RW, "4 s older but more allocated blocks")
	rep, err = Check([]string{d, e}, nil)
	require.NoError(t, err)
	require.Equal(t, []string{d, e}, rep.RW, "no salvage: no check")
}
