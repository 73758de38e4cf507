// Package readahead keeps several reads in flight ahead of the code that
// uses them, and hands their results over in order: a sequential consumer
// (a sender that frames a source in order, a receiver that hashes its
// target in order) then waits for the disk once per queue of reads, not
// once per read. Cold reads with O_DIRECT get no readahead from the page
// cache, so without it such a consumer keeps one request in flight where
// the device wants many.
package readahead

import "context"

// Do calls read(ctx, i) for every i in [0, n), at most depth of them at
// once, each on a goroutine of its own and never more than depth-1 ahead
// of the one in use, and use(i, v) for each result in order, on the
// calling goroutine. use owns v (it releases it on every path). With depth
// 1 or less everything runs on the calling goroutine, one read at a time.
//
// The first error in order, from a read or from use, or ctx's end (seen
// before each use), ends Do: no read starts after it, the context of the
// reads in flight is cancelled, and release (if not nil) is called on
// every value read but not used. Do returns that error (context.Cause
// for ctx's end) once no read is running.
func Do[T any](ctx context.Context, n, depth int, read func(ctx context.Context, i int) (T, error), use func(i int, v T) error, release func(T)) error {
	if depth <= 1 {
		for i := range n {
			if ctx.Err() != nil {
				return context.Cause(ctx)
			}
			v, err := read(ctx, i)
			if err != nil {
				return err
			}
			if err := use(i, v); err != nil {
				return err
			}
		}
		return nil
	}
	parent := ctx
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type result struct {
		v   T
		err error
	}
	// Read i reports in ring[i%depth]: a slot is free again once the
	// result in it is taken, before read i+depth starts.
	ring := make([]chan result, depth)
	for k := range ring {
		ring[k] = make(chan result, 1)
	}
	started := 0
	var err error
	i := 0
	for ; i < n; i++ {
		if parent.Err() != nil {
			err = context.Cause(parent)
			break // read i, if started, is drained below
		}
		for ; started < n && started < i+depth; started++ {
			go func(j int) {
				v, err := read(ctx, j)
				ring[j%depth] <- result{v, err}
			}(started)
		}
		r := <-ring[i%depth]
		if r.err != nil {
			err = r.err
		} else {
			err = use(i, r.v)
		}
		if err != nil {
			i++
			break
		}
	}
	if err != nil {
		cancel()
		for ; i < started; i++ {
			if r := <-ring[i%depth]; r.err == nil && release != nil {
				release(r.v)
			}
		}
	}
	return err
}
