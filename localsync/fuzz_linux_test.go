package localsync_test

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/sparsesync/sparsesync/internal/testutil/layout"
	"github.com/sparsesync/sparsesync/localsync"
	"github.com/sparsesync/sparsesync/sparse"
)

// FuzzCopy differentially checks Copy against the plainest reference — the
// source's bytes — for sources and old destinations built from the input:
// byte 0 picks the options, then 5-byte records (file, op, offset, length)
// write, punch or resize. After the copy the destination must hold exactly
// the source's bytes and have no data where the source has a hole.
func FuzzCopy(f *testing.F) {
	f.Add([]byte{0, 0, 0, 1, 2, 3, 1, 0, 5, 5, 5})
	f.Add([]byte{1, 0, 0, 0, 9, 9, 1, 1, 4, 4, 4, 0, 2, 200, 1, 1})
	f.Add([]byte{6, 1, 0, 0, 255, 255, 0, 0, 7, 0, 3, 0, 1, 10, 0, 2})
	f.Fuzz(func(t *testing.T, in []byte) {
		if len(in) == 0 || len(in) > 400 {
			t.Skip()
		}
		opts := localsync.Options{
			Atomic: in[0]&1 != 0, NoSync: true, DetectZeros: in[0]&4 != 0,
			Method: []localsync.Method{localsync.MethodAuto, localsync.MethodReadWrite}[in[0]>>1&1],
		}
		dir := t.TempDir()
		src, dst := filepath.Join(dir, "src"), filepath.Join(dir, "dst")
		files := map[byte]*os.File{}
		for i, p := range []string{src, dst} {
			fh, err := os.Create(p)
			if err != nil {
				t.Fatal(err)
			}
			files[byte(i)] = fh
		}
		buf := make([]byte, 64<<10)
		for rec := in[1:]; len(rec) >= 5; rec = rec[5:] {
			fh := files[rec[0]&1]
			off := int64(rec[2]) * 4093 % (1 << 20)
			n := int64(rec[3])*257 + int64(rec[4]) + 1
			n = min(n, int64(len(buf)))
			var err error
			switch rec[1] % 4 {
			case 0, 1:
				layout.Pattern(buf[:n], off+int64(rec[1]))
				if rec[1]%4 == 1 {
					clear(buf[:n/2]) // some zeros written as data
				}
				_, err = fh.WriteAt(buf[:n], off)
			case 2:
				_, err = sparse.PunchHole(fh, off, n)
			case 3:
				err = fh.Truncate(off)
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		for _, fh := range files {
			fh.Close()
		}
		if _, err := localsync.Copy(t.Context(), src, dst, &opts); err != nil {
			t.Fatal(err)
		}
		a, _ := os.ReadFile(src)
		b, _ := os.ReadFile(dst)
		if !bytes.Equal(a, b) {
			t.Fatalf("destination differs from source (len %d vs %d)", len(a), len(b))
		}
		sm, dm := layout.SeekWalk(t, src), layout.SeekWalk(t, dst)
		for _, d := range dm {
			if !covered(sm, d) {
				t.Fatalf("destination data %v where the source has a hole (source data %v)", d, sm)
			}
		}
	})
}

// covered reports whether r lies inside the union of ranges.
func covered(ranges []layout.Range, r layout.Range) bool {
	pos := r.Off
	for _, x := range ranges {
		if x.Off <= pos && pos < x.End() {
			pos = x.End()
		}
		if pos >= r.End() {
			return true
		}
	}
	return false
}
