package tcpsync

import (
	"sync/atomic"
	"time"
)

// Stats is what one sync did, in the words every sparsesync sync uses.
type Stats struct {
	// Size is the source's (and now the target's) size.
	Size int64
	// DataBytes is the source's data, in whole blocks.
	DataBytes int64
	// CopiedBytes is data sent in DATA frames (before compression).
	CopiedBytes int64
	// UnchangedBytes is data found equal by hash and not sent.
	UnchangedBytes int64
	// ZeroBytes is all-zero source data sent as zero markers.
	ZeroBytes int64
	// PunchedBytes is destination data turned into holes.
	PunchedBytes int64
	// WireBytesSent and WireBytesReceived count bytes on the connection(s),
	// from this side's point of view, summed over retries.
	WireBytesSent, WireBytesReceived int64
	// Elapsed is the wall time of the whole call.
	Elapsed time.Duration
	// Verified reports that the end-to-end digest matched (or, with
	// QuickCheck, that the receiver's record of a verified sync matched).
	Verified bool
	// ReadBack reports that the receiver also read the stored target back
	// after the final fdatasync and checked it whole (Options.ReadBack).
	ReadBack bool
	// ReadBackBytes is what the read-back read: the receiver's own data
	// (written or compared by it) within the source's data blocks, never
	// the ranges a peer merely described.
	ReadBackBytes int64
	// QuickCheck reports that the receiver already held this source version.
	QuickCheck bool
	// ResumedFrom is the offset the sync resumed from (0: from the start).
	ResumedFrom int64
	// Throttled is the time this side spent waiting on its budget
	// (Options.Budget, Server.Budget): the wall time during which at least
	// one of its reads, writes or sends waited, summed over attempts.
	Throttled time.Duration
	// Attempts is the number of connections made (1 without retries).
	Attempts int
}

// Progress is fed with atomic counters while a sync runs; a CLI reads it on a
// ticker. The zero value is ready to use.
type Progress struct {
	// Total is the source's data bytes, once known.
	Total atomic.Int64
	// Done is the source data bytes processed (sent, or found equal).
	Done atomic.Int64
	// Wire is the bytes sent and received on the connection so far.
	Wire atomic.Int64
}
