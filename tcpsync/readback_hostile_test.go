package tcpsync

import (
	"bufio"
	"crypto/rand"
	"encoding/binary"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sparsesync/sparsesync/internal/wire"
	"github.com/sparsesync/sparsesync/sparse"
)

// procReadBytes is the process's rchar from /proc/self/io (bytes read by
// read syscalls of any kind), or -1 where there is none.
func procReadBytes() int64 {
	f, err := os.Open("/proc/self/io")
	if err != nil {
		return -1
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "rchar: "); ok {
			n, _ := strconv.ParseInt(v, 10, 64)
			return n
		}
	}
	return -1
}

// TestReadBackReadsOnlyWhatWasWritten is hole 4: a push with the read-back
// flag claims 8 TiB of data with 1 MiB blocks, sends 1 MiB of DATA, a ZERO
// frame and an empty SEGEND per 4 GiB chunk, and DONE. The read-back used
// to read the whole claimed range (3.4 TB in 240 s before the report's
// run was stopped); now it reads the receiver's own data only: the bytes
// read back are those written, and the process's read syscalls (rchar,
// an oracle outside our code) stay within a small multiple of the input.
//
// With windows the claim is one WINDOW of a single 8 TiB extent; the
// receiver's read-back walks its own data, which is the MiB written.
func TestReadBackReadsOnlyWhatWasWritten(t *testing.T) {
	t.Run("whole maps", func(t *testing.T) { readBackOnlyWritten(t, false) })
	t.Run("windows", func(t *testing.T) { readBackOnlyWritten(t, true) })
}

func readBackOnlyWritten(t *testing.T, windows bool) {
	root := t.TempDir()
	var srv *Server
	addr, srv := startServer(t, root, func(s *Server) { srv = s })
	ends := sessionEnds(srv)
	const size, bs = 8 << 40, 1 << 20
	const chunk = wire.ChunkBlocks * bs
	rchar := procReadBytes()

	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	require.NoError(t, err)
	defer c.Close()
	require.NoError(t, c.SetDeadline(time.Now().Add(2*time.Minute)))
	f := newFramer(c)
	f.noWindows = !windows
	seed, err := clientHandshake(t.Context(), f, testToken, false)
	require.NoError(t, err)
	require.Equal(t, windows, f.windows)
	require.NoError(t, f.send(wire.Open, 0, openBody(opPush, openReadBack, bs, "claimed")))
	_, _, err = f.expect(wire.Opened)
	require.NoError(t, err)
	all := []sparse.Extent{{Off: 0, Len: size}}
	if windows {
		require.NoError(t, f.send(wire.SrcInfo, 0, binary.LittleEndian.AppendUint64(srcInfoBody(size, bs, ""), size)))
		_, _, err := f.expect(wire.DstInfo)
		require.NoError(t, err)
		w, err := wire.WindowFrame(0, size, all)
		require.NoError(t, err)
		require.NoError(t, f.send(wire.Window, 0, w))
		_, _, err = f.expect(wire.Window) // the new target's empty piece
		require.NoError(t, err)
	} else {
		require.NoError(t, f.writeFrame(wire.SrcInfo, 0, srcInfoBody(size, bs, "")))
		m, err := sparse.FromExtents(size, all)
		require.NoError(t, err)
		sendMapRaw(t, f, m)
		_, dst, err := f.expect(wire.DstInfo)
		require.NoError(t, err)
		_, err = readMap(f, int64(binary.LittleEndian.Uint64(dst))) // the new target's empty map
		require.NoError(t, err)
	}

	data := make([]byte, bs)
	_, _ = rand.Read(data)
	var sum digest
	sum.addBlock(newDigestKey(seed), 0, data)
	in := f.out.n.Load()
	for k := range int64(size / chunk) {
		start := k * chunk
		var d digest
		if k == 0 {
			b := binary.LittleEndian.AppendUint64(nil, 0)
			b = binary.LittleEndian.AppendUint32(b, bs)
			require.NoError(t, f.writeFrame(wire.Data, 0, b, data))
			start, d = bs, sum
		}
		z := binary.LittleEndian.AppendUint64(nil, uint64(start))
		z = binary.LittleEndian.AppendUint64(z, uint64((k+1)*chunk-start))
		require.NoError(t, f.writeFrame(wire.Zero, 0, z))
		se := binary.LittleEndian.AppendUint32(nil, uint32(k))
		se = append(se, 0)
		se = binary.LittleEndian.AppendUint64(se, 0)
		se = binary.LittleEndian.AppendUint64(se, d.a)
		se = binary.LittleEndian.AppendUint64(se, d.b)
		require.NoError(t, f.writeFrame(wire.SegEnd, 0, se))
	}
	done := binary.LittleEndian.AppendUint64(nil, size)
	done = binary.LittleEndian.AppendUint64(done, sum.a)
	done = binary.LittleEndian.AppendUint64(done, sum.b)
	require.NoError(t, f.send(wire.Done, 0, done))
	_, _, err = f.expect(wire.DoneAck)
	require.NoError(t, err, "the claimed file is verified by reading what was written")
	sent := f.out.n.Load() - in
	ev := waitSessions(t, ends, 1, time.Minute)[0]
	require.NoError(t, ev.Err)
	require.True(t, ev.Stats.ReadBack)
	t.Logf("sent %d bytes of frames for an 8 TiB claim; the server read back %d bytes in a session of %v", sent, ev.Stats.ReadBackBytes, ev.Elapsed)
	require.Equal(t, int64(bs), ev.Stats.ReadBackBytes, "read back exactly the MiB written")
	if rchar >= 0 {
		read := procReadBytes() - rchar
		t.Logf("the process's read syscalls: %d bytes", read)
		require.Less(t, read, int64(64<<20), "read syscalls bounded by the input, not the 8 TiB claim")
	}
	st, err := os.Stat(filepath.Join(root, "claimed"))
	require.NoError(t, err)
	require.Equal(t, int64(size), st.Size())
}
