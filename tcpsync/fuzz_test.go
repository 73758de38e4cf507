package tcpsync

import (
	"bytes"
	"context"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/sparsesync/sparsesync/internal/testutil/layout"
	"github.com/sparsesync/sparsesync/internal/wire"
)

// streamConn is a net.Conn that reads a fixed byte stream and discards writes.
type streamConn struct {
	r io.Reader
}

func (c *streamConn) Read(b []byte) (int, error)       { return c.r.Read(b) }
func (c *streamConn) Write(b []byte) (int, error)      { return len(b), nil }
func (c *streamConn) Close() error                     { return nil }
func (c *streamConn) LocalAddr() net.Addr              { return &net.TCPAddr{} }
func (c *streamConn) RemoteAddr() net.Addr             { return &net.TCPAddr{} }
func (c *streamConn) SetDeadline(time.Time) error      { return nil }
func (c *streamConn) SetReadDeadline(time.Time) error  { return nil }
func (c *streamConn) SetWriteDeadline(time.Time) error { return nil }
func newStreamConn(b []byte) *streamConn               { return &streamConn{r: bytes.NewReader(b)} }
func (c *streamConn) String() string                   { return "stream" }

// teeConn records what is written through it.
type teeConn struct {
	net.Conn
	mu  sync.Mutex
	out bytes.Buffer
}

func (c *teeConn) Write(b []byte) (int, error) {
	c.mu.Lock()
	c.out.Write(b)
	c.mu.Unlock()
	return c.Conn.Write(b)
}

// recordSenderStream runs a real sync over net.Pipe and returns the bytes
// the sender sent: a realistic seed for the receiver fuzzer; with windows,
// both sides take the maps in windows (wire.FeatWindows).
func recordSenderStream(t testing.TB, dir string, l layout.Layout, dstL *layout.Layout, windows ...bool) []byte {
	src := filepath.Join(dir, "seed-src")
	layout.Create(t, src, l)
	dst := filepath.Join(dir, "seed-dst")
	os.Remove(dst)
	os.Remove(dst + sidecarSuffix)
	if dstL != nil {
		layout.Create(t, dst, *dstL)
	}
	a, b := net.Pipe()
	tee := &teeConn{Conn: a}
	f, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fs, err := NewFileSource(f)
	if err != nil {
		t.Fatal(err)
	}
	tg, err := openLocalTarget(dst, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tg.close()
	p := syncParams{bs: 4096, compress: CompressLZ4}
	sf, rf := newFramer(tee), newFramer(b)
	sf.windows = len(windows) > 0 && windows[0]
	rf.windows = sf.windows
	var wg sync.WaitGroup
	wg.Go(func() {
		_, err := sendSource(context.Background(), sf, fs, p)
		if err != nil {
			t.Error(err)
		}
		a.Close()
	})
	if _, err := receiveTarget(context.Background(), rf, tg, p); err != nil {
		t.Error(err)
	}
	b.Close()
	wg.Wait()
	return tee.out.Bytes()
}

// writeSeed stores a seed under testdata/fuzz when TCPSYNC_WRITE_SEEDS is
// set (to refresh them after a protocol change).
func writeSeed(t testing.TB, fuzzer, name string, b []byte) {
	if os.Getenv("TCPSYNC_WRITE_SEEDS") == "" {
		return
	}
	dir := filepath.Join("testdata", "fuzz", fuzzer)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	data := "go test fuzz v1\n[]byte(" + strconv.Quote(string(b)) + ")\n"
	if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

// FuzzReceiver feeds arbitrary sender streams to a receiver writing a
// scratch target: it must never panic, hang, allocate beyond the limits or
// write outside the announced size.
func FuzzReceiver(f *testing.F) {
	dir := f.TempDir()
	small := layout.Layout{Size: 70_000, Data: layout.Ranges(0, 5000, 20_000, 9000, 65_536, 4464)}
	changed := layout.Layout{Size: 70_000, Data: layout.Ranges(0, 5000, 30_000, 9000)}
	full := recordSenderStream(f, dir, small, nil)
	delta := recordSenderStream(f, dir, small, &changed)
	writeSeed(f, "FuzzReceiver", "recorded-full", full)
	writeSeed(f, "FuzzReceiver", "recorded-delta", delta)
	f.Add(full)
	f.Add(delta)
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, stream []byte) { fuzzReceive(t, dir, changed, stream, false) })
}

// fuzzReceive feeds stream to a receiver writing a scratch target laid out
// as dstL (taking maps in windows if windows).
func fuzzReceive(t *testing.T, dir string, dstL layout.Layout, stream []byte, windows bool) {
	dst := filepath.Join(dir, "fuzz-dst")
	os.Remove(dst + sidecarSuffix)
	layout.Create(t, dst, dstL)
	tg, err := openLocalTarget(dst, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tg.close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	fr := newFramer(newStreamConn(stream))
	fr.windows = windows
	st, err := receiveTarget(ctx, fr, tg, syncParams{})
	if err == nil && !st.Verified {
		t.Fatal("success without verification")
	}
	if fi, serr := os.Stat(dst); serr == nil && fi.Size() > 1<<30 {
		t.Fatalf("target grew to %d bytes", fi.Size())
	}
}

// FuzzReceiverWindows is FuzzReceiver for a receiver that takes the maps
// in windows (wire.FeatWindows).
func FuzzReceiverWindows(f *testing.F) {
	dir := f.TempDir()
	small := layout.Layout{Size: 70_000, Data: layout.Ranges(0, 5000, 20_000, 9000, 65_536, 4464)}
	changed := layout.Layout{Size: 70_000, Data: layout.Ranges(0, 5000, 30_000, 9000)}
	f.Add(recordSenderStream(f, dir, small, nil, true))
	f.Add(recordSenderStream(f, dir, small, &changed, true))
	f.Fuzz(func(t *testing.T, stream []byte) { fuzzReceive(t, dir, changed, stream, true) })
}

// FuzzFrame reads frames from arbitrary bytes and decodes every body kind.
func FuzzFrame(f *testing.F) {
	f.Add([]byte{byte(wire.Data), 0, 0, 0, 12, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12})
	f.Add([]byte{byte(wire.Extents), wire.FlagLast, 0, 0, 3, 0, 0, 0, 1, 0, 0})
	f.Add([]byte{byte(wire.Error), 0, 0, 0, 4, 0, 0, 0, 2, 0, 'h', 'i'})
	f.Add([]byte{byte(wire.Hello), 0, 0, 0, 0xff, 0xff, 0xff, 0xff})
	writeSeed(f, "FuzzFrame", "data", []byte{byte(wire.Data), 0, 0, 0, 12, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12})
	f.Fuzz(func(t *testing.T, b []byte) {
		fr := newFramer(newStreamConn(b))
		fr.budget = wire.MaxPreAuth * 4
		for range 64 {
			ft, _, body, err := fr.readFrame()
			if err != nil {
				return
			}
			if len(body) > ft.Limit() {
				t.Fatalf("%s body of %d bytes over its limit", ft, len(body))
			}
			d := wire.Dec{B: body, T: ft}
			switch ft {
			case wire.Hello:
				_, _ = wire.ParseHello(body)
			case wire.Error:
				_ = decodeError(body)
			case wire.Open:
				d.U8()
				d.U32()
				d.U32()
				d.Bytes(2 * wire.MaxPath)
				_ = d.End()
			case wire.SrcInfo:
				d.U64()
				d.U32()
				d.U32()
				d.Bytes(wire.MaxIdentity)
				_ = d.End()
			case wire.DoneAck:
				_, _ = parseDoneAck(body)
			case wire.Window:
				_, _, _ = wire.ParseWindow(body, 0, wire.MaxSize, 4096)
			case wire.Data, wire.Zero, wire.SegEnd, wire.Hashes:
				for d.Err == nil {
					d.U64()
				}
			}
		}
	})
}

// FuzzHandshake plays arbitrary client bytes against the server handshake:
// without the token nobody gets through.
func FuzzHandshake(f *testing.F) {
	ch := wire.NewHello(0).Marshal()
	var seed bytes.Buffer
	fw := newFramer(&streamConn{r: bytes.NewReader(nil)})
	fw.w.Reset(&seed)
	_ = fw.writeFrame(wire.Hello, 0, ch)
	_ = fw.writeFrame(wire.Auth, 0, make([]byte, 32))
	_ = fw.flush()
	writeSeed(f, "FuzzHandshake", "hello-auth", seed.Bytes())
	f.Add(seed.Bytes())
	f.Add([]byte("TSYN"))
	f.Fuzz(func(t *testing.T, b []byte) {
		fr := newFramer(newStreamConn(b))
		fr.budget = wire.MaxPreAuth
		_, err := serverHandshake(context.Background(), fr, testToken, false, 0)
		if err == nil {
			t.Fatal("handshake succeeded without the token")
		}
	})
}
