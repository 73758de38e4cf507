package tcpsync

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestShortLastBlockCompared: a file whose size is not a multiple of the
// block size changes only in its short last block; a re-sync with a full
// compare, pushed and pulled, must find and send that block, and an
// unchanged re-sync must compare it equal and send nothing.
func TestShortLastBlockCompared(t *testing.T) {
	for _, bs := range []int{4096, 64 << 10} {
		for _, pull := range []bool{false, true} {
			name := map[bool]string{false: "push", true: "pull"}[pull]
			t.Run(name+"/"+map[int]string{4096: "4k", 64 << 10: "64k"}[bs], func(t *testing.T) {
				root, local := t.TempDir(), t.TempDir()
				addr, _ := startServer(t, root, nil)
				size := 3*bs + 100
				content := bytes.Repeat([]byte("0123456789abcdef"), size/16+1)[:size]
				src, dst := filepath.Join(local, "img"), filepath.Join(root, "img")
				if pull {
					src, dst = dst, src
				}
				require.NoError(t, os.WriteFile(src, content, 0o644))
				o := clientOpts()
				o.BlockSize = bs
				sync := func() Stats {
					ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
					defer cancel()
					var st Stats
					var err error
					if pull {
						st, err = Pull(ctx, addr, "img", dst, o)
					} else {
						st, err = PushFile(ctx, addr, src, "img", o)
					}
					require.NoError(t, err)
					return st
				}
				sync()
				requireSame(t, src, dst)
				// Unchanged, the short last block compares equal like the
				// whole ones: a plan that leaves it out of the compare
				// sends it again every time.
				o.FullCompare = true
				st := sync()
				require.Zero(t, st.CopiedBytes, "an unchanged re-sync sends nothing: %+v", st)
				require.Equal(t, int64(size), st.UnchangedBytes, "every block, the short last one too, compares equal: %+v", st)
				// Change 40 bytes of the 100-byte last block only.
				f, err := os.OpenFile(src, os.O_WRONLY, 0)
				require.NoError(t, err)
				_, err = f.WriteAt(bytes.Repeat([]byte{'X'}, 40), int64(size-50))
				require.NoError(t, err)
				require.NoError(t, f.Close())
				st = sync()
				requireSame(t, src, dst)
				require.Equal(t, int64(100), st.CopiedBytes, "only the short last block is sent: %+v", st)
				require.Equal(t, int64(3*bs), st.UnchangedBytes, "every whole block compares equal: %+v", st)
			})
		}
	}
}

// TestDigestBindsOffsets: the end-to-end digest must tell the same blocks
// at swapped offsets apart (a block delivered at the wrong offset), and a
// block from its shorter prefix.
func TestDigestBindsOffsets(t *testing.T) {
	a := bytes.Repeat([]byte{'a'}, 4096)
	b := bytes.Repeat([]byte{'b'}, 4096)
	k := newDigestKey(42)
	var d1, d2, d3 digest
	d1.addBlock(k, 0, a)
	d1.addBlock(k, 4096, b)
	d2.addBlock(k, 0, b)
	d2.addBlock(k, 4096, a)
	d3.addBlock(k, 4096, b)
	d3.addBlock(k, 0, a)
	require.NotEqual(t, d1, d2, "swapped blocks give the same digest")
	require.Equal(t, d1, d3, "the digest is order-free")
	var short, long digest
	short.addBlock(k, 0, a[:100])
	long.addBlock(k, 0, append(a[:100:100], 0))
	require.NotEqual(t, short, long, "a block and its prefix give the same digest")
}

// TestSymlinkedDirRefusedByServer: a directory symlink that stays inside the
// root is one os.Root would follow; the server's own directory check alone
// must refuse it, for pushes and pulls, and write nothing through it.
func TestSymlinkedDirRefusedByServer(t *testing.T) {
	root, local := t.TempDir(), t.TempDir()
	require.NoError(t, os.Mkdir(filepath.Join(root, "real"), 0o755))
	require.NoError(t, os.Symlink("real", filepath.Join(root, "link")))
	require.NoError(t, os.WriteFile(filepath.Join(root, "real", "old"), []byte("old"), 0o644))
	addr, _ := startServer(t, root, nil)
	src := filepath.Join(local, "img")
	require.NoError(t, os.WriteFile(src, []byte("new content"), 0o644))

	_, err := PushFile(t.Context(), addr, src, "link/img", clientOpts())
	require.ErrorIs(t, err, ErrPathOutsideRoot)
	require.ErrorContains(t, err, `"link/img": link is a symlink`, "the directory check refused")
	require.NoFileExists(t, filepath.Join(root, "real", "img"))

	_, err = Pull(t.Context(), addr, "link/old", filepath.Join(local, "copy"), clientOpts())
	require.ErrorIs(t, err, ErrPathOutsideRoot)
	require.ErrorContains(t, err, `"link/old": link is a symlink`, "the directory check refused")
	require.NoFileExists(t, filepath.Join(local, "copy"))
}
