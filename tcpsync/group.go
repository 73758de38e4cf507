package tcpsync

import (
	"context"
	"errors"
	"sync"
)

// group runs goroutines that share a context; the first error cancels it.
// The one exception to "first": a peer's ERROR read after the connection
// failed under a write (the peer reported, then closed, while this side
// still sent) replaces that error, since it says why.
type group struct {
	wg     sync.WaitGroup
	mu     sync.Mutex
	err    error
	cancel context.CancelCauseFunc
}

func newGroup(ctx context.Context) (*group, context.Context) {
	ctx, cancel := context.WithCancelCause(ctx)
	return &group{cancel: cancel}, ctx
}

func (g *group) fail(err error) {
	if err == nil {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	switch {
	case g.err == nil:
		g.err = err
		g.cancel(err)
	case closed(g.err) && errors.As(err, new(*RemoteError)):
		g.err = err
	}
}

func (g *group) Go(fn func() error) {
	g.wg.Go(func() { g.fail(fn()) })
}

func (g *group) Wait() error {
	g.wg.Wait()
	g.cancel(nil)
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.err
}
