package tcpsync

import (
	"sync/atomic"
	"time"
)

// SlowReadBack makes every receiver of a sync run with o hold each read of
// its read-back d (for tests of packages that pass Options on, such as a
// TCP replica rebuild); the returned function says how long the read-backs
// lasted, from the first read to the end of the last.
func SlowReadBack(o *Options, d time.Duration) (lasted func() time.Duration) {
	var first, last atomic.Int64
	o.hooks = &testHooks{afterReadBackRead: func() {
		first.CompareAndSwap(0, time.Now().UnixNano())
		time.Sleep(d)
		last.Store(time.Now().UnixNano())
	}}
	return func() time.Duration { return time.Duration(last.Load() - first.Load()) }
}
