package bench

import (
	"io"
	"net"
	"sync"
	"sync/atomic"
)

// wireProxy listens on a loopback port and forwards every connection to the
// current target, counting the bytes it carries in both directions: the
// bytes on the wire of a network tool, measured outside the tool.
type wireProxy struct {
	ln     net.Listener
	mu     sync.Mutex
	target string
	bytes  atomic.Int64
	conns  sync.WaitGroup
}

func newWireProxy() (*wireProxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &wireProxy{ln: ln}
	go p.accept()
	return p, nil
}

// Port is the port clients connect to.
func (p *wireProxy) Port() int { return p.ln.Addr().(*net.TCPAddr).Port }

// reset points the proxy at target and zeroes the count.
func (p *wireProxy) reset(target string) {
	p.mu.Lock()
	p.target = target
	p.mu.Unlock()
	p.bytes.Store(0)
}

// count waits for the connections of the run to end and returns the bytes
// they carried.
func (p *wireProxy) count() int64 {
	p.conns.Wait()
	return p.bytes.Load()
}

func (p *wireProxy) Close() error { return p.ln.Close() }

func (p *wireProxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		target := p.target
		p.mu.Unlock()
		p.conns.Add(1)
		go p.forward(c, target)
	}
}

func (p *wireProxy) forward(c net.Conn, target string) {
	defer p.conns.Done()
	defer c.Close()
	s, err := net.Dial("tcp", target)
	if err != nil {
		return
	}
	defer s.Close()
	var wg sync.WaitGroup
	pipe := func(dst, src net.Conn) {
		defer wg.Done()
		n, _ := io.Copy(dst, src)
		p.bytes.Add(n)
		if tc, ok := dst.(*net.TCPConn); ok {
			_ = tc.CloseWrite()
		}
	}
	wg.Add(2)
	go pipe(s, c)
	go pipe(c, s)
	wg.Wait()
}
