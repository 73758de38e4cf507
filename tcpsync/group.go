package tcpsync

import (
	"context"
	"sync"
)

// group runs goroutines that share a context; the first error cancels it.
type group struct {
	wg     sync.WaitGroup
	once   sync.Once
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
	g.once.Do(func() {
		g.err = err
		g.cancel(err)
	})
}

func (g *group) Go(fn func() error) {
	g.wg.Go(func() { g.fail(fn()) })
}

func (g *group) Wait() error {
	g.wg.Wait()
	g.cancel(nil)
	return g.err
}
