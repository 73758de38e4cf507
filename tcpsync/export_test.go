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
	o.hooks, lasted = slowReadBack(d)
	return lasted
}

// slowReadBack returns hooks that hold each read of a read-back d, and a
// function that says how long the read-backs lasted.
func slowReadBack(d time.Duration) (*testHooks, func() time.Duration) {
	var first, last atomic.Int64
	h := &testHooks{afterReadBackRead: func() {
		first.CompareAndSwap(0, time.Now().UnixNano())
		time.Sleep(d)
		last.Store(time.Now().UnixNano())
	}}
	return h, func() time.Duration { return time.Duration(last.Load() - first.Load()) }
}
