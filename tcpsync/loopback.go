package tcpsync

import (
	"context"
	"fmt"
	"net"
)

// ServeLoopback starts srv on a free port of 127.0.0.1 in a goroutine and
// returns its address. Cancel ctx to stop it; wait then returns Serve's
// result. It is what an in-process demo or test needs:
//
//	srv := &tcpsync.Server{Root: dir, NoAuth: true}
//	addr, wait, err := tcpsync.ServeLoopback(ctx, srv)
//	st, err := tcpsync.PushFile(ctx, addr, "disk.img", "copy.img", &tcpsync.Options{NoAuth: true})
//	cancel(); wait()
func ServeLoopback(ctx context.Context, srv *Server) (addr string, wait func() error, err error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, fmt.Errorf("listen on loopback: %w", err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	return ln.Addr().String(), func() error { return <-done }, nil
}
