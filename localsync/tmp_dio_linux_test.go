package localsync_test

import (
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/sparsesync/sparsesync/internal/layout"
	"github.com/sparsesync/sparsesync/internal/loopfs"
	"github.com/sparsesync/sparsesync/localsync"
	"golang.org/x/sys/unix"
)

func alignedB(n int) []byte {
	b := make([]byte, n+4096)
	o := int(uintptr(unsafe.Pointer(&b[0])) & 4095)
	if o != 0 {
		o = 4096 - o
	}
	return b[o : o+n]
}

func readAll(t *testing.T, l layout.Layout, paths []string, flag int) time.Duration {
	var fs []*os.File
	for _, p := range paths {
		f, err := os.OpenFile(p, os.O_RDONLY|flag, 0)
		if err != nil {
			t.Fatal(err)
		}
		fs = append(fs, f)
		defer f.Close()
	}
	type job struct{ off, n int64 }
	jobs := make(chan job)
	var wg sync.WaitGroup
	t0 := time.Now()
	for range 8 {
		wg.Go(func() {
			bufs := [][]byte{alignedB(1 << 20), alignedB(1 << 20)}
			for j := range jobs {
				var iw sync.WaitGroup
				for i, f := range fs {
					iw.Go(func() {
						if _, err := f.ReadAt(bufs[i][:j.n], j.off); err != nil {
							t.Error(err)
						}
					})
				}
				iw.Wait()
			}
		})
	}
	for _, d := range l.Data {
		for off := d.Off; off < d.End(); off += 1 << 20 {
			jobs <- job{off, min(1<<20, d.End()-off)}
		}
	}
	close(jobs)
	wg.Wait()
	return time.Since(t0)
}

func TestTmpDIO(t *testing.T) {
	for _, k := range []loopfs.Kind{loopfs.XFS, loopfs.Ext4} {
		dir := loopfs.Mount(t, k, 12*gib)
		l := scattered("25pct", gib, 25, 9)
		src, ours := filepath.Join(dir, "src"), filepath.Join(dir, "ours")
		layout.Write(src, l)
		localsync.Copy(t.Context(), src, ours, localsync.Options{Reflink: localsync.ReflinkNever, NoSync: true})
		for i := 0; i < 4; i++ {
			loopfs.DropCaches(t)
			a := readAll(t, l, []string{src, ours}, 0)
			loopfs.DropCaches(t)
			b := readAll(t, l, []string{src, ours}, unix.O_DIRECT)
			t.Logf("%s buffered %v direct %v", k, a, b)
		}
	}
}
