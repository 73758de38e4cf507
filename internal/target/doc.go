// Package target is the write side of a sync: a destination file or block
// device that can be written at an offset, have ranges turned back into holes
// (or zeros where it cannot hold holes), be sized, synced, and — in atomic
// mode — be a temporary file renamed over the destination only when the copy
// is complete.
//
// localsync and tcpsync both write through it, so a destination behaves the
// same whichever way its bytes arrived:
//
//	t, err := target.Create(path, target.Options{Atomic: true, Mode: 0o644})
//	t.SetSize(size)            // ftruncate; a device must be large enough
//	t.WriteAt(b, off)          // data
//	t.Zero(off, n)             // holes: punch, else zeros (devices: punch/zero-out)
//	t.Commit(sync)             // fdatasync; atomic: fsync, rename, fsync dir
//	t.Abort()                  // after any failure: temp file removed
//
// A File is safe for concurrent WriteAt and Zero calls on disjoint ranges;
// SetSize, Commit, Abort and Close must not run concurrently with anything.
package target
