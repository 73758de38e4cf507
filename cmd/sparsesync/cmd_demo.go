package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/sparsesync/sparsesync/internal/bytesize"
	"github.com/sparsesync/sparsesync/localsync"
	"github.com/sparsesync/sparsesync/sparse"
	"github.com/sparsesync/sparsesync/tcpsync"
)

// demoOpts are the flags of "sparsesync demo".
type demoOpts struct {
	dir string
}

func newDemoCommand(g *globalOpts) *cobra.Command {
	opts := &demoOpts{}
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Show a sparse copy, an incremental re-sync and a network sync on a sample image",
		Long: "demo makes a 64 MiB sparse sample image in a temporary directory, copies it, changes a few\n" +
			"blocks (rewrites, a punched extent, a filled hole), re-syncs the copy and prints the extent\n" +
			"maps and what each step wrote; then it pushes the image over TCP to an in-process server on\n" +
			"127.0.0.1, changes two blocks and pushes again. It removes everything it made.\n" + exitCodesHelp,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runDemo(cmd.Context(), g, opts)
		},
	}
	cmd.Flags().StringVar(&opts.dir, "dir", "", "make the temporary directory under `DIR` (default: the system's)")
	return cmd
}

const (
	demoKiB  = int64(1) << 10
	demoMiB  = int64(1) << 20
	demoSize = 64 * demoMiB
)

// demoData is where the sample image has data.
var demoData = []sparse.Extent{{Off: 0, Len: demoMiB}, {Off: 8 * demoMiB, Len: 512 * demoKiB}, {Off: 40 * demoMiB, Len: 2 * demoMiB}, {Off: demoSize - 4*demoKiB, Len: 4 * demoKiB}}

func runDemo(ctx context.Context, g *globalOpts, opts *demoOpts) (err error) {
	dir, err := os.MkdirTemp(opts.dir, "sparsesync-demo-")
	if err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	defer func() {
		if rerr := os.RemoveAll(dir); rerr != nil && err == nil {
			err = fmt.Errorf("demo: cleaning up: %w", rerr)
		}
	}()
	w := g.stdout
	src, dst := filepath.Join(dir, "disk.img"), filepath.Join(dir, "copy.img")
	if err := demoWrite(src, func(f *os.File) error {
		if err := f.Truncate(demoSize); err != nil {
			return err
		}
		for i, e := range demoData {
			if err := demoFill(f, e, byte('a'+i)); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		return err
	}
	fmt.Fprintf(w, "Working in %s (removed at the end).\n\n", dir)
	if err := demoMap(ctx, w, "1. Sample image disk.img, 64 MiB with 4 data extents:", src); err != nil {
		return err
	}
	if err := demoCopy(ctx, w, "2. Copy it (a new file: reflink where the filesystem can, else only the data extents):", src, dst); err != nil {
		return err
	}
	if err := demoWrite(src, func(f *os.File) error {
		for _, off := range []int64{4096 * 10, 40*demoMiB + 4096*3, 40*demoMiB + 4096*300} {
			if err := demoFill(f, sparse.Extent{Off: off, Len: 4096}, 'X'); err != nil {
				return err
			}
		}
		if _, err := sparse.PunchHole(f, 8*demoMiB, 512*demoKiB); err != nil {
			return err
		}
		return demoFill(f, sparse.Extent{Off: 20 * demoMiB, Len: 256 * demoKiB}, 'N')
	}); err != nil {
		return err
	}
	if err := demoMap(ctx, w, "3. Change disk.img: rewrite 3 blocks of 4 KiB, punch the 512 KiB extent at 8 MiB, write 256 KiB into the hole at 20 MiB:", src); err != nil {
		return err
	}
	if err := demoCopy(ctx, w, "4. Re-sync the copy: only the changed blocks are written, the punched extent becomes a hole:", src, dst); err != nil {
		return err
	}
	if err := demoCopy(ctx, w, "5. Re-sync again: nothing has changed, nothing is written:", src, dst); err != nil {
		return err
	}
	same, err := demoSame(src, dst)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "copy.img is identical to disk.img, byte for byte and hole for hole: %v\n\n", same)
	if !same {
		return fmt.Errorf("demo: %s differs from %s", dst, src)
	}
	return demoNetwork(ctx, w, dir, src)
}

// demoNetwork pushes the sample image to an in-process tcpsync server on
// 127.0.0.1, changes two blocks and pushes again.
func demoNetwork(ctx context.Context, w io.Writer, dir, src string) error {
	root := filepath.Join(dir, "remote")
	if err := os.Mkdir(root, 0o755); err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	sctx, stop := context.WithCancel(ctx)
	addr, wait, err := tcpsync.ServeLoopback(sctx, &tcpsync.Server{Root: root, NoAuth: true})
	if err != nil {
		stop()
		return fmt.Errorf("demo: %w", err)
	}
	defer func() { stop(); wait() }()
	push := func(title string) error {
		st, err := tcpsync.PushFile(ctx, addr, src, "disk.img", &tcpsync.Options{NoAuth: true})
		if err != nil {
			return fmt.Errorf("demo: push: %w", err)
		}
		fmt.Fprintf(w, "%s\n   sparsesync push --no-auth disk.img %s disk.img\n   data %s: copied %s, unchanged %s, punched %s; on the wire %s sent, %s received; verified %v\n\n",
			title, addr, bytesize.Format(st.DataBytes), bytesize.Format(st.CopiedBytes), bytesize.Format(st.UnchangedBytes), bytesize.Format(st.PunchedBytes),
			bytesize.Format(st.WireBytesSent), bytesize.Format(st.WireBytesReceived), st.Verified)
		return nil
	}
	if err := push("6. Push disk.img over TCP to a server on 127.0.0.1 (an empty root: holes are never sent):"); err != nil {
		return err
	}
	if err := demoWrite(src, func(f *os.File) error {
		for _, off := range []int64{4096 * 100, 40*demoMiB + 4096*7} {
			if err := demoFill(f, sparse.Extent{Off: off, Len: 4096}, 'Y'); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		return err
	}
	if err := push("7. Change 2 blocks and push again: block hashes find them, only they travel:"); err != nil {
		return err
	}
	same, err := demoSame(src, filepath.Join(root, "disk.img"))
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "remote/disk.img is identical to disk.img, byte for byte and hole for hole: %v\n", same)
	if !same {
		return fmt.Errorf("demo: the pushed copy differs from %s", src)
	}
	return nil
}

func demoWrite(path string, fn func(*os.File) error) error {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	err = fn(f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("demo: writing %s: %w", path, err)
	}
	return nil
}

func demoFill(f *os.File, e sparse.Extent, c byte) error {
	_, err := f.WriteAt(bytes.Repeat([]byte{c}, int(e.Len)), e.Off)
	return err
}

func demoMap(ctx context.Context, w io.Writer, title, path string) error {
	m, _, err := sparse.ReadMap(ctx, path)
	if err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	fmt.Fprintf(w, "%s\n   %s: %s of data\n", title, filepath.Base(path), bytesize.Format(m.Bytes()))
	for _, e := range m.Extents() {
		fmt.Fprintf(w, "     data [%s, %s)\n", humanOffset(e.Off), humanOffset(e.End()))
	}
	fmt.Fprintln(w)
	return nil
}

func demoCopy(ctx context.Context, w io.Writer, title, src, dst string) error {
	st, err := localsync.Copy(ctx, src, dst, nil)
	if err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	fmt.Fprintf(w, "%s\n   sparsesync local %s %s\n   %s", title, filepath.Base(src), filepath.Base(dst),
		statsText(filepath.Base(src), filepath.Base(dst), st))
	m, _, err := sparse.ReadMap(ctx, dst)
	if err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	var parts []string
	for _, e := range m.Extents() {
		parts = append(parts, fmt.Sprintf("[%s, %s)", humanOffset(e.Off), humanOffset(e.End())))
	}
	fmt.Fprintf(w, "   %s data: %s\n\n", filepath.Base(dst), strings.Join(parts, " "))
	return nil
}

// humanOffset prints an offset in KiB or MiB when it is a whole multiple.
func humanOffset(n int64) string {
	switch {
	case n == 0:
		return "0"
	case n%demoMiB == 0:
		return fmt.Sprintf("%d MiB", n/demoMiB)
	case n%demoKiB == 0:
		return fmt.Sprintf("%d KiB", n/demoKiB)
	}
	return fmt.Sprint(n)
}

// demoSame compares both files' bytes and data maps.
func demoSame(a, b string) (bool, error) {
	ma, _, err := sparse.ReadMap(context.Background(), a)
	if err != nil {
		return false, err
	}
	mb, _, err := sparse.ReadMap(context.Background(), b)
	if err != nil {
		return false, err
	}
	da, err := os.ReadFile(a)
	if err != nil {
		return false, err
	}
	db, err := os.ReadFile(b)
	if err != nil {
		return false, err
	}
	return ma.Equal(mb) && bytes.Equal(da, db), nil
}
