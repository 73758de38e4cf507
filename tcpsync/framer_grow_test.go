package tcpsync

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"github.com/sparsesync/sparsesync/internal/wire"
	"github.com/stretchr/testify/require"
)

// TestFrameBuffersGrowOnce: DATA frames each a little larger than the
// last (as a sparse source's extents make them), then the largest BATCH
// frame, cross intact, and neither
// the writer's frame buffer nor the reader's body buffer is made again
// after the first frame over their session size. Grown frame by frame,
// each was a fresh megabyte several times a push, and on a VM whose page
// faults cost 20 us each that was a tenth of a short push.
func TestFrameBuffersGrowOnce(t *testing.T) {
	for _, mac := range []bool{false, true} {
		t.Run(map[bool]string{false: "plain", true: "mac"}[mac], func(t *testing.T) {
			c, s := tcpPair(t)
			w, r := newFramer(c), newFramer(s)
			if mac {
				tr := []byte("transcript")
				require.NoError(t, w.authenticate([]byte("token"), tr, true))
				require.NoError(t, r.authenticate([]byte("token"), tr, false))
			} else {
				w.grow()
				r.grow()
			}
			// The last is a BATCH frame, the largest kind (wire.MaxBody).
			sizes := []int{300 << 10, 500 << 10, 700 << 10, 900 << 10, 1000 << 10, wire.MaxDataFrame, wire.MaxBatchFrame}
			typ := func(i int) wire.Type {
				if sizes[i] > wire.MaxDataFrame {
					return wire.Batch
				}
				return wire.Data
			}
			rng := rand.New(rand.NewPCG(1, 2))
			bodies := make([][]byte, len(sizes))
			for i, n := range sizes {
				bodies[i] = make([]byte, n)
				for j := range bodies[i] {
					bodies[i][j] = byte(rng.Uint32())
				}
			}
			errc := make(chan error, 1)
			wcaps := make([]int, len(sizes))
			go func() {
				for i, b := range bodies {
					if err := w.writeFrame(typ(i), 0, b[:10], b[10:]); err != nil {
						errc <- err
						return
					}
					wcaps[i] = cap(w.w.b)
					if err := w.flush(); err != nil {
						errc <- err
						return
					}
				}
				errc <- nil
			}()
			rcaps := make([]int, len(sizes))
			for i, want := range bodies {
				got, _, body, err := r.readFrame()
				require.NoError(t, err)
				require.Equal(t, typ(i), got)
				require.True(t, bytes.Equal(want, body), "frame %d's body", i)
				rcaps[i] = cap(r.rbuf)
			}
			require.NoError(t, <-errc)
			for i := 1; i < len(sizes); i++ {
				require.Equal(t, wcaps[0], wcaps[i], "the writer's buffer was made again for frame %d (%d bytes): caps %v", i, sizes[i], wcaps)
				require.Equal(t, rcaps[0], rcaps[i], "the reader's buffer was made again for frame %d (%d bytes): caps %v", i, sizes[i], rcaps)
			}
		})
	}
}
