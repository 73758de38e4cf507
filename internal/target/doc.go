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
//	t.Clone(src), t.CloneRange(src, off, n), kcopy.CopyRange(ctx, src, t, off, n)
//	                           // the kernel's copies: reflinks, copy_file_range
//	w := target.NewWritebacker(t, 8<<20); w.Wrote(n); w.Stop()
//	                           // writeback started as the bytes accumulate, off the caller
//	t.Commit(sync)             // fdatasync; atomic: fsync, rename, fsync dir
//	t.Abort()                  // after any failure: temp file removed
//
// A server that confines clients to a directory passes it as Options.Root:
// names then resolve inside it, a final symlink is never followed, and the
// temporary file and the rename stay inside it. Publish is Commit for a
// caller that keeps the published file open (its lock, its identity).
//
// Every write reaches the destination through a File method, so one fault
// injector (Faults, Options.Faults) can fail any of them in tests.
//
// A File is safe for concurrent WriteAt, Zero, CloneRange and CopyFileRange
// calls on disjoint ranges;
// SetSize, Commit, Abort and Close must not run concurrently with anything.
package target
