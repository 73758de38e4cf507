package tcpsync

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sparsesync/sparsesync/internal/testutil/layout"
	"github.com/sparsesync/sparsesync/internal/testutil/loopfs"
	"github.com/sparsesync/sparsesync/sparse"
)

// syncCase prepares a source, optionally syncs it once, changes it, and
// expects the second (or only) sync to be byte-identical.
type syncCase struct {
	name    string
	make    func(t *testing.T, path string)
	change  func(t *testing.T, path string) // nil: a single sync to an empty destination
	check   func(t *testing.T, st Stats)
	options func(o *Options)
}

func syncCases() []syncCase {
	img := func(t *testing.T, p string) { require.NoError(t, writeImage(p, 256<<20, 0.1, 40, 1)) }
	var cases []syncCase
	cases = append(cases,
		syncCase{name: "full", make: img, check: func(t *testing.T, st Stats) {
			require.Equal(t, st.DataBytes, st.CopiedBytes+st.ZeroBytes)
			require.Positive(t, st.ZeroBytes, "zero chunks travel as markers")
		}},
		syncCase{name: "1pct-changed", make: img, change: func(t *testing.T, p string) { mutate(t, p, 64, 2) },
			check: func(t *testing.T, st Stats) {
				require.LessOrEqual(t, st.CopiedBytes, int64(64*4096))
				require.Positive(t, st.CopiedBytes)
				require.Equal(t, st.DataBytes, st.CopiedBytes+st.UnchangedBytes+st.ZeroBytes)
				require.Greater(t, st.UnchangedBytes, st.DataBytes*8/10)
			}},
		syncCase{name: "nothing-changed", make: img, change: func(*testing.T, string) {},
			options: func(o *Options) { o.FullCompare = true },
			check: func(t *testing.T, st Stats) {
				require.Zero(t, st.CopiedBytes)
				require.False(t, st.QuickCheck)
				require.Less(t, st.WireBytesSent+st.WireBytesReceived, int64(16<<10))
			}},
		syncCase{name: "quick-check", make: img, change: func(*testing.T, string) {},
			check: func(t *testing.T, st Stats) {
				require.True(t, st.QuickCheck)
				require.Less(t, st.WireBytesSent+st.WireBytesReceived, int64(4<<10))
			}},
		syncCase{name: "grown", make: img, change: func(t *testing.T, p string) {
			f, err := os.OpenFile(p, os.O_WRONLY, 0)
			require.NoError(t, err)
			defer f.Close()
			require.NoError(t, f.Truncate(300<<20+123))
			_, err = f.WriteAt([]byte("grown tail data"), 300<<20)
			require.NoError(t, err)
		}},
		syncCase{name: "shrunk", make: img, change: func(t *testing.T, p string) {
			require.NoError(t, os.Truncate(p, 100<<20+7))
		}},
		syncCase{name: "extent-punched", make: img, change: func(t *testing.T, p string) {
			m, _, err := sparse.ReadMap(t.Context(), p)
			require.NoError(t, err)
			e := m.Extents()[m.Len()/2]
			f, err := os.OpenFile(p, os.O_RDWR, 0)
			require.NoError(t, err)
			defer f.Close()
			punched, err := sparse.PunchHole(f, e.Off, e.Len)
			require.NoError(t, err)
			require.True(t, punched)
		}, check: func(t *testing.T, st Stats) { require.Positive(t, st.PunchedBytes) }},
	)
	// On ext4 (TestAcceptance) the 100,000-extent layout is 10,000 unless
	// SPARSESYNC_HEAVY=1: the same windows and batches at a tenth of the
	// time (TestWindowsHoldMemoryFixed and TestWideMapPushPull go further).
	for _, l := range layout.OnLoop(layout.Standard(), true) {
		if l.Name == "empty" || l.Name == "first-byte-1GiB" {
			continue
		}
		cases = append(cases, syncCase{name: l.Name, make: func(t *testing.T, p string) { layout.Create(t, p, l) }})
	}
	return cases
}

// TestAcceptance runs every workload as a push and as a pull over 127.0.0.1
// on a real ext4 filesystem.
func TestAcceptance(t *testing.T) {
	loopfs.NeedRoot(t)
	mnt := loopfs.Mount(t, loopfs.Ext4, 4<<30)
	for _, dir := range []string{"push", "pull"} {
		for _, c := range syncCases() {
			t.Run(dir+"/"+c.name, func(t *testing.T) {
				base := filepath.Join(mnt, dir+"-"+c.name)
				root, local := filepath.Join(base, "root"), filepath.Join(base, "local")
				require.NoError(t, os.MkdirAll(root, 0o755))
				require.NoError(t, os.MkdirAll(local, 0o755))
				t.Cleanup(func() { os.RemoveAll(base) })
				addr, _ := startServer(t, root, nil)
				src, dst := filepath.Join(local, "src"), filepath.Join(root, "img")
				if dir == "pull" {
					src, dst = filepath.Join(root, "img"), filepath.Join(local, "dst")
				}
				run := func() Stats {
					o := clientOpts()
					if c.options != nil && c.change != nil {
						c.options(o)
					}
					var st Stats
					var err error
					if dir == "push" {
						st, err = PushFile(t.Context(), addr, src, "img", o)
					} else {
						st, err = Pull(t.Context(), addr, "img", dst, o)
					}
					require.NoError(t, err)
					require.True(t, st.Verified)
					requireSame(t, src, dst)
					return st
				}
				c.make(t, src)
				st := run()
				if c.change != nil {
					c.change(t, src)
					st = run()
				}
				t.Logf("%s: copied %d unchanged %d zero %d punched %d wire %d/%d in %v", c.name, st.CopiedBytes,
					st.UnchangedBytes, st.ZeroBytes, st.PunchedBytes, st.WireBytesSent, st.WireBytesReceived, st.Elapsed)
				if c.check != nil {
					if dir == "pull" {
						st.WireBytesSent, st.WireBytesReceived = st.WireBytesReceived, st.WireBytesSent
					}
					c.check(t, st)
				}
			})
		}
	}
}

// TestFilesystems pushes a changed image onto every filesystem kind.
func TestFilesystems(t *testing.T) {
	loopfs.Run(t, 1<<30, func(t *testing.T, kind loopfs.Kind, dir string) {
		root, local := filepath.Join(dir, "root"), filepath.Join(dir, "local")
		require.NoError(t, os.MkdirAll(root, 0o755))
		require.NoError(t, os.MkdirAll(local, 0o755))
		addr, _ := startServer(t, root, nil)
		src := filepath.Join(local, "src")
		require.NoError(t, writeImage(src, 64<<20, 0.2, 16, 3))
		_, err := PushFile(t.Context(), addr, src, "img", clientOpts())
		require.NoError(t, err)
		requireSame(t, src, filepath.Join(root, "img"))
		mutate(t, src, 20, 4)
		o := clientOpts()
		o.Atomic = true
		st, err := PushFile(t.Context(), addr, src, "img", o)
		require.NoError(t, err)
		require.LessOrEqual(t, st.CopiedBytes, int64(20*4096))
		requireSame(t, src, filepath.Join(root, "img"))
		_, err = os.Stat(filepath.Join(root, ".img"+tmpSuffix))
		require.ErrorIs(t, err, os.ErrNotExist, "the temporary file is gone after an atomic sync")
	})
}
