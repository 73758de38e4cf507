package tcpsync

import "os"

// Test hooks of a session. None of them fails an operation on the target:
// faults on its writes, syncs, renames, kernel copies and sidecar go
// through internal/target's Faults (Server.faults, Client.faults). These
// do what a failing call cannot: corrupt the stored bytes between the
// write and the check (bit rot the read-back must catch), slow the
// read-back's reads, and make a side play an older peer.

// testHooks let tests act on the target at fixed points of a receiver's
// session (nil outside tests).
type testHooks struct {
	// beforeCheckpoint runs after a checkpoint's fdatasync, before the
	// target is stamped and the checkpoint recorded up to done.
	beforeCheckpoint func(f *os.File, done int64)
	// beforeFinalCheck runs before the final check: after the final
	// fdatasync and before the read-back, or before the digest comparison
	// when there is no read-back.
	beforeFinalCheck func(f *os.File)
	// afterReadBackRead runs after each read of the read-back (on its
	// worker goroutines): a test slows the storage down with it.
	afterReadBackRead func()
	// narrowMaps makes the client play an older peer, without
	// wire.FeatWideMaps.
	narrowMaps bool
	// hmacOnly makes its side (a client, or a server) play an older
	// peer that tags frames with HMAC-SHA256 only, without wire.FeatGMAC.
	hmacOnly bool
	// notBusy makes its side play a peer without featBusy (no busy
	// PROGRESS frames either way).
	notBusy bool
	// noBatch makes its side (a client, or a server) play a peer without
	// wire.FeatBatch (a DATA frame per range).
	noBatch bool
	// agreedMAC, on a client, learns after each handshake whether the
	// peers agreed on GMAC.
	agreedMAC func(gmac bool)
	// noWindows makes its side (a client, or a server) play a peer without
	// wire.FeatWindows or wire.FeatPieceMaps (whole maps up front).
	noWindows bool
	// targetRead learns the length of each read of the target's compare
	// blocks (hashAhead's goroutine).
	targetRead func(n int64)
	// sessionMemory, when positive, is the client's session memory
	// budget (the server's is Server.MaxSessionMemory).
	sessionMemory int64
}

func (h *testHooks) readBackRead() {
	if h != nil && h.afterReadBackRead != nil {
		h.afterReadBackRead()
	}
}

func (h *testHooks) finalCheck(f *os.File) {
	if h != nil && h.beforeFinalCheck != nil {
		h.beforeFinalCheck(f)
	}
}

func (h *testHooks) readTarget(n int64) {
	if h != nil && h.targetRead != nil {
		h.targetRead(n)
	}
}
