package replica

// SetCounterMode switches r's revision counter mode in place, for the
// external benchmarks (bench_test.go) that measure the modes on one
// replica. No I/O may be in flight.
func SetCounterMode(r *Replica, m CounterMode) { r.mode = m }
