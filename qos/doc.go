// Package qos keeps a sync polite on a node that has other work to do.
//
// A [Limiter] is a byte-rate budget: a token bucket that holds a tenth of a
// second of its rate, so that over any one-second window it admits at most
// 110% of the rate, and hands out pieces of at most a tenth of a second
// (4 KiB to 256 KiB), so that callers sharing it get fair shares. Several syncs may share one Limiter (a node-wide
// budget), a Limiter may have a parent (a session's own limit inside a
// server's budget: both hold), and its rate may be changed while syncs wait
// on it; the change is in force for the next piece each caller asks for,
// within a tenth of a second for a caller that waits for its bytes one piece
// at a time. A nil *Limiter admits everything.
//
// [Budget] groups the three budgets a sync draws from, each bounding its own
// direction: bytes read from storage, bytes written to storage, and bytes
// sent or received on the wire. A full copy of D bytes limited to RATE takes
// about D/RATE; a re-sync that reads both sides about 2D/RATE.
//
// [SetIOPriority] sets the I/O scheduling class of every thread of the
// process (ioprio_set), for the schedulers that honour it (BFQ; mq-deadline
// only between its classes; none and kyber ignore it).
package qos
