package disks_test

import (
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/sparsesync/sparsesync/internal/testutil/loopfs"
	"github.com/sparsesync/sparsesync/replica"
	"github.com/sparsesync/sparsesync/scheduler/disks"
)

// threeDisks mounts three ext4 filesystems once for the rule tests; each
// subtest empties them first.
func threeDisks(t *testing.T) [3]string {
	var d [3]string
	for i := range d {
		d[i] = subdir(t, mount(t, loopfs.Ext4), "replicas")
	}
	return d
}

func empty(t *testing.T, dirs ...string) {
	t.Helper()
	for _, d := range dirs {
		ents, err := os.ReadDir(d)
		require.NoError(t, err)
		for _, e := range ents {
			require.NoError(t, os.RemoveAll(filepath.Join(d, e.Name())))
		}
	}
}

// snapshotTree lists every file under dirs with its size, mtime and inode.
func snapshotTree(t *testing.T, dirs ...string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, d := range dirs {
		require.NoError(t, filepath.WalkDir(d, func(p string, e fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			fi, err := e.Info()
			if err != nil {
				return err
			}
			st := fi.Sys().(*syscall.Stat_t)
			out[p] = strings.Join([]string{fi.Mode().String(), itoa(fi.Size()), itoa(fi.ModTime().UnixNano()), itoa(int64(st.Ino)), itoa(st.Blocks)}, " ")
			return nil
		}))
	}
	return out
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

func TestRules(t *testing.T) {
	d := threeDisks(t)
	base := func() disks.Config {
		return disks.Config{
			Disks: []disks.DiskConfig{
				{Name: "d1", Path: d[0], ReservedBytes: 1 << 40}, // under pressure
				{Name: "d2", Path: d[1], ReservedBytes: 60 * mib},
				{Name: "d3", Path: d[2]},
			},
			PressurePercent: ptr(90),
		}
	}
	pass := func(t *testing.T, cfg disks.Config) (disks.PassResult, *recorder) {
		t.Helper()
		res, rec, err := runPass(t, t.Context(), cfg)
		require.NoError(t, err)
		return res, rec
	}

	t.Run("writer-skipped", func(t *testing.T) {
		empty(t, d[:]...)
		sums := map[string]string{}
		fill(t, d[0], 0, 1, sums)
		w, err := replica.Open(filepath.Join(d[0], repName(0)), nil)
		require.NoError(t, err)
		res, rec := pass(t, base())
		require.Len(t, res.Planned, 1)
		require.Empty(t, res.Moved)
		require.Len(t, res.Skipped, 1)
		skips := rec.kinds(disks.EventSkip)
		require.Len(t, skips, 1)
		require.Contains(t, skips[0].Reason, "held open by a writer")
		require.Empty(t, rec.kinds(disks.EventMoveStart))
		// The writer was not disturbed.
		_, err = w.WriteAt(make([]byte, 4096), 0)
		require.NoError(t, err)
		require.NoError(t, w.Close())
		sums[repName(0)] = exportSum(t, filepath.Join(d[0], repName(0)))
		require.Equal(t, map[string]string{repName(0): "d1"}, checkClean(t, base(), sums))

		// While the agent moves it, a writer is kept out.
		cfg := base()
		var openErr error
		disks.SetStepHook(&cfg, func(step string) {
			if step == "copy" {
				r, err := replica.Open(filepath.Join(d[0], repName(0)), nil)
				if err == nil {
					r.Close()
				}
				openErr = err
			}
		})
		res, _ = pass(t, cfg)
		require.Len(t, res.Moved, 1)
		require.ErrorIs(t, openErr, replica.ErrBusy)
		require.Equal(t, map[string]string{repName(0): "d3"}, checkClean(t, base(), sums))
	})

	t.Run("no-scheduling-never-a-target", func(t *testing.T) {
		empty(t, d[:]...)
		sums := map[string]string{}
		fill(t, d[0], 0, 1, sums)
		// Control: the roomiest disk, d3, is the planner's choice.
		cfg := base()
		cfg.DryRun = true
		res, _ := pass(t, cfg)
		require.Len(t, res.Planned, 1)
		require.Equal(t, "d3", res.Planned[0].To)
		// d3 disallowed: d2.
		cfg = base()
		cfg.Disks[2].NoScheduling = true
		res, _ = pass(t, cfg)
		require.Len(t, res.Moved, 1)
		require.Equal(t, "d2", res.Moved[0].To)
		require.Equal(t, map[string]string{repName(0): "d2"}, checkClean(t, cfg, sums))
		// Now on d2, under pressure there, with d1 and d3 disallowed: no move.
		cfg = base()
		cfg.Disks[0].ReservedBytes, cfg.Disks[1].ReservedBytes = 0, 1<<40
		cfg.Disks[0].NoScheduling, cfg.Disks[2].NoScheduling = true, true
		res, rec := pass(t, cfg)
		require.True(t, res.Disks[1].Pressured)
		require.Empty(t, res.Planned)
		require.Len(t, rec.kinds(disks.EventPressure), 1)
		require.Equal(t, map[string]string{repName(0): "d2"}, checkClean(t, cfg, sums))
	})

	t.Run("disk-anti-affinity", func(t *testing.T) {
		empty(t, d[:]...)
		sums := map[string]string{}
		a, b := "shared-aaaaaaaa", "shared-bbbbbbbb"
		sums[a] = writeReplica(t, filepath.Join(d[0], a), repSize, repData, 1)
		sums[b] = writeReplica(t, filepath.Join(d[2], b), repSize, repData, 2)
		// Soft: d3 is roomier but holds the volume; d2 qualifies, so d2.
		cfg := base()
		cfg.DryRun = true
		res, _ := pass(t, cfg)
		require.Len(t, res.Planned, 1)
		require.Equal(t, disks.Move{Replica: a, Volume: "shared", From: "d1", To: "d2", Bytes: res.Planned[0].Bytes}, res.Planned[0])
		// Only d3 left: soft mode lands there, hard mode refuses.
		cfg.Disks[1].NoScheduling = true
		res, _ = pass(t, cfg)
		require.Len(t, res.Planned, 1)
		require.Equal(t, "d3", res.Planned[0].To)
		cfg.HardAntiAffinity = true
		cfg.DryRun = false
		res, _ = pass(t, cfg)
		require.Empty(t, res.Planned, "hard anti-affinity must refuse the move")
		require.True(t, res.Disks[0].Pressured)
		require.Equal(t, map[string]string{a: "d1", b: "d3"}, checkClean(t, cfg, sums))
	})

	t.Run("dry-run-changes-nothing", func(t *testing.T) {
		empty(t, d[:]...)
		sums := map[string]string{}
		fill(t, d[0], 0, 2, sums)
		before := snapshotTree(t, d[:]...)
		cfg := base()
		cfg.DryRun = true
		res, rec := pass(t, cfg)
		require.Len(t, res.Planned, 1)
		require.Empty(t, res.Moved)
		skips := rec.kinds(disks.EventSkip)
		require.Len(t, skips, 1)
		require.Contains(t, skips[0].Reason, "dry run")
		require.Equal(t, before, snapshotTree(t, d[:]...))
	})

	t.Run("enospc-on-target", func(t *testing.T) {
		empty(t, d[:]...)
		sums := map[string]string{}
		fill(t, d[0], 0, 1, sums)
		cfg := base()
		cfg.Disks[1].NoScheduling = true // the target is d3
		filler := filepath.Join(d[2], "filler")
		disks.SetStepHook(&cfg, func(step string) {
			if step != "copy" {
				return
			}
			// Leave 4 MiB of the 12 MiB the copy needs (root may use
			// ext4's reserved blocks: count free, not available).
			var st unix.Statfs_t
			require.NoError(t, unix.Statfs(d[2], &st))
			f, err := os.Create(filler)
			require.NoError(t, err)
			// Extent metadata takes some too: back off until it fits.
			size := int64(st.Bfree)*int64(st.Bsize) - 4*mib
			for err = unix.ENOSPC; errors.Is(err, unix.ENOSPC) && size > 0; size -= mib {
				err = allocate(t, f, size)
			}
			require.NoError(t, err)
			require.NoError(t, f.Close())
			require.NoError(t, unix.Statfs(d[2], &st))
			t.Logf("target filled: %d bytes free for a copy of %d", int64(st.Bfree)*int64(st.Bsize), repData)
			require.Less(t, int64(st.Bfree)*int64(st.Bsize), int64(repData))
		})
		res, rec := pass(t, cfg)
		require.Empty(t, res.Moved)
		require.Len(t, res.Failed, 1)
		failed := rec.kinds(disks.EventMoveFailed)
		require.Len(t, failed, 1)
		require.Contains(t, failed[0].Reason, "no space left on device")
		// The source stays, intact; the target holds nothing of the move.
		require.Equal(t, map[string]string{repName(0): "d1"}, checkClean(t, cfg, sums))
		ents, err := os.ReadDir(d[2])
		require.NoError(t, err)
		require.Len(t, ents, 2)
		require.Equal(t, []string{disks.AgentDir, "filler"}, []string{ents[0].Name(), ents[1].Name()})
		ents, err = os.ReadDir(filepath.Join(d[2], disks.AgentDir))
		require.NoError(t, err)
		require.Empty(t, ents)
		// With the space back the move goes through.
		require.NoError(t, os.Remove(filler))
		cfg = base()
		cfg.Disks[1].NoScheduling = true
		res, _ = pass(t, cfg)
		require.Len(t, res.Moved, 1)
		require.Equal(t, map[string]string{repName(0): "d3"}, checkClean(t, cfg, sums))
	})

	t.Run("pressure-percent-zero-turns-moves-off", func(t *testing.T) {
		empty(t, d[:]...)
		sums := map[string]string{}
		fill(t, d[0], 0, 1, sums)
		cfg := base()
		cfg.PressurePercent = ptr(0)
		res, rec := pass(t, cfg)
		require.False(t, res.Disks[0].Pressured)
		require.Empty(t, res.Planned)
		require.Len(t, rec.events, 1, "only the pass event")
		require.Equal(t, disks.EventPass, rec.events[0].Kind)
		require.Equal(t, map[string]string{repName(0): "d1"}, checkClean(t, cfg, sums))
		// Unset is Longhorn's default, 90: d1 is under pressure.
		cfg.PressurePercent = nil
		cfg.DryRun = true
		res, rec = pass(t, cfg)
		require.True(t, res.Disks[0].Pressured)
		require.Len(t, res.Planned, 1)
		require.Len(t, rec.kinds(disks.EventPressure), 1)
		require.Contains(t, rec.kinds(disks.EventPressure)[0].Reason, "below 10%")
	})

	t.Run("second-agent-refused", func(t *testing.T) {
		a, err := disks.New(base())
		require.NoError(t, err)
		defer a.Close()
		_, err = disks.New(base())
		require.ErrorIs(t, err, disks.ErrAgentRunning)
	})

	t.Run("orphan-move-directory-refused", func(t *testing.T) {
		empty(t, d[:]...)
		orphan := filepath.Join(d[1], disks.AgentDir, "vol00-000000a0.12345678", "new")
		require.NoError(t, os.MkdirAll(orphan, 0o700))
		require.NoError(t, os.WriteFile(filepath.Join(orphan, "volume.meta"), []byte("{}"), 0o600))
		// A dry run says what a real start would: it refuses too.
		dry := base()
		dry.DryRun = true
		_, err := disks.New(dry)
		require.ErrorIs(t, err, disks.ErrRecovery)
		_, err = disks.New(base())
		require.ErrorIs(t, err, disks.ErrRecovery)
		require.Contains(t, err.Error(), orphan[:len(orphan)-len("/new")])
		_, err = os.Stat(filepath.Join(orphan, "volume.meta"))
		require.NoError(t, err, "recovery must not touch what it cannot decide")
	})
}

// TestBadConfig: each bad configuration is one error naming the disk and
// the cause, returned before anything moves.
func TestBadConfig(t *testing.T) {
	mnt := mount(t, loopfs.Ext4)
	a, b := subdir(t, mnt, "a"), subdir(t, mnt, "b")
	sums := map[string]string{}
	fill(t, a, 0, 1, sums)
	file := filepath.Join(mnt, "file")
	require.NoError(t, os.WriteFile(file, nil, 0o600))
	require.NoError(t, os.Symlink(b, filepath.Join(mnt, "link-to-b")))
	rootDir := t.TempDir() // on the root filesystem (TMPDIR is)
	dev := func(p string) uint64 {
		var st unix.Stat_t
		require.NoError(t, unix.Stat(p, &st))
		return uint64(st.Dev)
	}
	if dev(rootDir) != dev("/") {
		t.Fatalf("TMPDIR %s is not on the root filesystem; the not-mounted case needs one", rootDir)
	}
	good := disks.DiskConfig{Name: "d1", Path: a, ReservedBytes: 1 << 40}
	for _, tc := range []struct {
		name string
		disk disks.DiskConfig
		want string
	}{
		{"not-a-directory", disks.DiskConfig{Name: "d2", Path: file}, `disk "d2": ` + file + `: not a directory`},
		{"missing", disks.DiskConfig{Name: "d2", Path: filepath.Join(mnt, "nope")}, `disk "d2": stat ` + filepath.Join(mnt, "nope") + `: no such file or directory`},
		{"same-path", disks.DiskConfig{Name: "d2", Path: a}, `disk "d1" and disk "d2": two names for one directory ` + a},
		{"same-path-spelled-differently", disks.DiskConfig{Name: "d2", Path: b + "/../a"}, `two names for one directory`},
		{"not-mounted", disks.DiskConfig{Name: "d2", Path: rootDir}, `disk "d2": ` + rootDir + `: not a mounted disk`},
		{"relative", disks.DiskConfig{Name: "d2", Path: "replicas"}, `path is not absolute`},
		{"duplicate-name", disks.DiskConfig{Name: "d1", Path: b}, `disk "d1": name used twice`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := disks.Config{Disks: []disks.DiskConfig{good, tc.disk}}
			_, err := disks.New(cfg)
			require.ErrorIs(t, err, disks.ErrConfig)
			require.Contains(t, err.Error(), tc.want)
			require.NotContains(t, err.Error(), "\n")
			require.Equal(t, map[string]string{repName(0): "d1"}, checkClean(t, disks.Config{Disks: []disks.DiskConfig{good, {Name: "d2", Path: b}}}, sums))
		})
	}
	// A symlink to another disk's directory is the same directory.
	_, err := disks.New(disks.Config{Disks: []disks.DiskConfig{good, {Name: "d2", Path: b}, {Name: "d3", Path: filepath.Join(mnt, "link-to-b")}}})
	require.ErrorIs(t, err, disks.ErrConfig)
	require.Contains(t, err.Error(), `disk "d2" and disk "d3": two names for one directory`)
	// The good configuration does move.
	a2, err := disks.New(disks.Config{Disks: []disks.DiskConfig{good, {Name: "d2", Path: b}}})
	require.NoError(t, err)
	defer a2.Close()
	res, err := a2.Pass(t.Context())
	require.NoError(t, err)
	require.Len(t, res.Moved, 1)
}

// TestRootFSCheck: the "not mounted" check looks at the filesystem, not
// only at st_dev. A btrfs filesystem stands in for the root filesystem;
// a subvolume of it has an st_dev of its own but is the same filesystem,
// so a disk in it is refused like a plain directory of the root, while a
// disk in another mounted filesystem, and two disks sharing it, pass.
func TestRootFSCheck(t *testing.T) {
	root := mount(t, loopfs.Btrfs)
	other := mount(t, loopfs.Ext4)
	sub := filepath.Join(root, "sub")
	out, err := exec.Command("btrfs", "subvolume", "create", sub).CombinedOutput()
	require.NoError(t, err, "%s", out)
	subDisk, plainDisk := subdir(t, sub, "replicas"), subdir(t, root, "replicas")
	o1, o2 := subdir(t, other, "a"), subdir(t, other, "b")
	var rootSt, subSt unix.Stat_t
	require.NoError(t, unix.Stat(root, &rootSt))
	require.NoError(t, unix.Stat(subDisk, &subSt))
	require.NotEqual(t, rootSt.Dev, subSt.Dev, "a btrfs subvolume has an st_dev of its own")

	check := func(disk disks.DiskConfig) error {
		cfg := disks.Config{Disks: []disks.DiskConfig{{Name: "o1", Path: o1}, {Name: "o2", Path: o2}, disk}}
		disks.SetRoot(&cfg, root)
		return cfg.Validate()
	}
	for _, tc := range []struct {
		name string
		path string
	}{{"subvolume", subDisk}, {"plain-directory", plainDisk}} {
		t.Run(tc.name, func(t *testing.T) {
			err := check(disks.DiskConfig{Name: "d", Path: tc.path})
			require.ErrorIs(t, err, disks.ErrConfig)
			require.Contains(t, err.Error(), `disk "d": `+tc.path+`: not a mounted disk (it is on the root filesystem, btrfs `)
			require.Contains(t, err.Error(), "mounted at "+root)
			require.NoError(t, check(disks.DiskConfig{Name: "d", Path: tc.path, AllowRootFS: true}))
		})
	}
	require.NoError(t, check(disks.DiskConfig{Name: "d", Path: subdir(t, other, "c")}), "three disks on one mounted filesystem")
}
