package target

import (
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestWritebacker: writeback starts once the bytes written reach the
// threshold (never below it, never with a threshold of 0), Stop returns
// only after the start in progress, and a nil Writebacker takes Wrote.
func TestWritebacker(t *testing.T) {
	f, err := Create(filepath.Join(t.TempDir(), "dst"), &Options{Mode: 0o644})
	require.NoError(t, err)
	defer f.Close()
	buf := make([]byte, 64<<10)
	for i := range buf {
		buf[i] = byte(i*7 + 1)
	}
	write := func(w *Writebacker, n int) {
		for i := range n {
			_, err := f.WriteAt(buf, int64(i)*int64(len(buf)))
			require.NoError(t, err)
			w.Wrote(int64(len(buf)))
		}
	}
	for _, tc := range []struct {
		name    string
		every   int64
		pieces  int
		started bool
	}{
		{"below the threshold", 1 << 20, 15, false},
		{"at the threshold", 1 << 20, 16, true},
		{"many times over", 256 << 10, 64, true},
		{"never", 0, 64, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := NewWritebacker(f, tc.every)
			write(w, tc.pieces)
			w.Stop()
			if tc.started {
				require.Positive(t, w.Started())
			} else {
				require.Zero(t, w.Started())
			}
		})
	}
	var w *Writebacker
	w.Wrote(1 << 30)
}

// TestWritebackerManyWriters: Wrote from several goroutines at once (a
// copy's workers) counts every byte (run with -race): 4 x 16 pieces of
// 64 KiB reach a 4 MiB threshold only all together.
func TestWritebackerManyWriters(t *testing.T) {
	f, err := Create(filepath.Join(t.TempDir(), "dst"), &Options{Mode: 0o644})
	require.NoError(t, err)
	defer f.Close()
	w := NewWritebacker(f, 4<<20)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 16 {
				w.Wrote(64 << 10)
			}
		})
	}
	wg.Wait()
	w.Stop()
	require.Equal(t, int64(1), w.Started())
}
