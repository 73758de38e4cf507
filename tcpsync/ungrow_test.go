package tcpsync

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sparsesync/sparsesync/internal/testutil/layout"
	"github.com/sparsesync/sparsesync/internal/wire"
)

// cutBefore returns stream up to its first frame of type t (all of it if
// there is none).
func cutBefore(t *testing.T, stream []byte, typ wire.Type) []byte {
	for off := 0; off+wire.HeaderLen <= len(stream); {
		ft, _, n, err := wire.ParseHeader(stream[off : off+wire.HeaderLen])
		if err != nil {
			t.Fatalf("recorded stream at %d: %v", off, err)
		}
		if ft == typ {
			return stream[:off]
		}
		off += wire.HeaderLen + n
	}
	return stream
}

// A push that fails before any of its data reaches past the target's old
// end leaves the target as long as it was (the source's claimed size costs
// nothing, but a failed sync must not leave a file that looks like the
// source); one that wrote past it keeps the size, for a resume.
func TestFailedPushKeepsTargetSize(t *testing.T) {
	old := layout.Layout{Size: 70_000, Data: layout.Ranges(0, 5000, 30_000, 9000)}
	big := layout.Layout{Size: 64 << 30, Data: layout.Ranges(0, 5000, 20_000, 9000, 40<<30, 8192)}
	for _, windows := range []bool{false, true} {
		name := map[bool]string{false: "maps", true: "windows"}[windows]
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			stream := recordSenderStream(t, dir, big, &old, windows)
			for _, c := range []struct {
				cut  []byte
				want int64
			}{
				{cutBefore(t, stream, wire.Data), old.Size},
				{cutBefore(t, stream, wire.Done), big.Size}, // data at 40 GiB was written
			} {
				dst := filepath.Join(dir, "dst")
				os.Remove(dst + sidecarSuffix)
				layout.Create(t, dst, old)
				tg, err := openLocalTarget(dst, false, nil)
				if err != nil {
					t.Fatal(err)
				}
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				fr := newFramer(newStreamConn(c.cut))
				fr.windows = windows
				_, err = receiveTarget(ctx, fr, tg, syncParams{})
				cancel()
				tg.close()
				t.Logf("cut at %d of %d: %v", len(c.cut), len(stream), err)
				if err == nil {
					t.Fatal("a cut stream succeeded")
				}
				fi, serr := os.Stat(dst)
				if serr != nil {
					t.Fatal(serr)
				}
				if fi.Size() != c.want {
					t.Errorf("cut at %d of %d bytes (%v): target is %d bytes, want %d", len(c.cut), len(stream), err, fi.Size(), c.want)
				}
			}
		})
	}
}
