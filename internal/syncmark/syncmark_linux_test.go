package syncmark

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sparsesync/sparsesync/sparse"
)

// TestMatches: a mark stands only for the source version, shape and
// destination it recorded; each field changed on its own breaks it.
func TestMatches(t *testing.T) {
	now := time.Unix(1_800_000_000, 123)
	src := sparse.FileInfo{Dev: 1, Ino: 2, Size: 3 << 20, ModTime: now, ChangeTime: now.Add(time.Millisecond), Mode: 0o644}
	dst := sparse.FileInfo{Dev: 1, Ino: 9, Size: 3 << 20, ModTime: now.Add(time.Second), Mode: 0o644}
	m := Mark{Source: Version(src), DataBytes: 4096, Dev: 1, Ino: 9, Size: 3 << 20, Mtime: dst.ModTime.UnixNano()}
	if !m.Matches(src, dst, "") {
		t.Fatal("the recorded versions do not match themselves")
	}
	cases := map[string]func(s, d *sparse.FileInfo, shape *string){
		"source ctime":      func(s, _ *sparse.FileInfo, _ *string) { s.ChangeTime = s.ChangeTime.Add(1) },
		"source mtime":      func(s, _ *sparse.FileInfo, _ *string) { s.ModTime = s.ModTime.Add(1) },
		"source size":       func(s, _ *sparse.FileInfo, _ *string) { s.Size++ },
		"source inode":      func(s, _ *sparse.FileInfo, _ *string) { s.Ino++ },
		"source device":     func(s, _ *sparse.FileInfo, _ *string) { s.Dev++ },
		"destination mtime": func(_, d *sparse.FileInfo, _ *string) { d.ModTime = d.ModTime.Add(1) },
		"destination size":  func(_, d *sparse.FileInfo, _ *string) { d.Size-- },
		"destination inode": func(_, d *sparse.FileInfo, _ *string) { d.Ino++ },
		"destination dev":   func(_, d *sparse.FileInfo, _ *string) { d.Dev++ },
		"shape":             func(_, _ *sparse.FileInfo, sh *string) { *sh = "zeros" },
	}
	for name, change := range cases {
		t.Run(name, func(t *testing.T) {
			s, d, shape := src, dst, ""
			change(&s, &d, &shape)
			if m.Matches(s, d, shape) {
				t.Fatalf("a mark matched with the %s changed", name)
			}
		})
	}
	if (Mark{}).Matches(sparse.FileInfo{}, sparse.FileInfo{}, "") {
		t.Fatal("the empty mark matched")
	}
}

// TestWriteRead: a written mark reads back with the destination's identity
// filled in, and Clear removes it.
func TestWriteRead(t *testing.T) {
	path := filepath.Join(t.TempDir(), "dst")
	if err := os.WriteFile(path, []byte("data"), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, ok := Read(f); ok {
		t.Fatal("a mark on a fresh file")
	}
	if err := Write(context.Background(), f, Mark{Source: "file:1:2:3:4:5", DataBytes: 4}); err != nil {
		t.Skipf("no user extended attributes here: %v", err)
	}
	m, ok := Read(f)
	info, err := sparse.Stat(f)
	if err != nil {
		t.Fatal(err)
	}
	if !ok || m.Source != "file:1:2:3:4:5" || m.DataBytes != 4 || m.Ino != info.Ino || m.Dev != info.Dev ||
		m.Size != 4 || m.Mtime != info.ModTime.UnixNano() {
		t.Fatalf("read back %+v (ok %v), file %+v", m, ok, info)
	}
	if err := Clear(f); err != nil {
		t.Fatal(err)
	}
	if _, ok := Read(f); ok {
		t.Fatal("a mark after Clear")
	}
	if err := Clear(f); err != nil {
		t.Fatalf("Clear without a mark: %v", err)
	}
}
