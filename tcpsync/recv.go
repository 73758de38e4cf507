package tcpsync

import "context"

// recv takes the next value from ch, or returns ctx's cause once ctx is
// done; ok is false when ch is closed (a worker's loop then ends with nil).
func recv[T any](ctx context.Context, ch <-chan T) (v T, ok bool, err error) {
	select {
	case v, ok = <-ch:
		return v, ok, nil
	case <-ctx.Done():
		return v, false, context.Cause(ctx)
	}
}
