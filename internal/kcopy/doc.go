// Package kcopy is the one kernel-copy layer localsync and tcpsync share:
// FICLONE and FICLONERANGE (reflinks), copy_file_range with the errno
// classification of the standard library's internal/poll, and the
// read/write fallback. It makes the system calls; the destination is
// reached through Dst, which internal/target's File satisfies, so that the
// File's fault injector (Inject) reaches every call.
//
// Every function says whether the kernel handled the request. handled false
// means nothing was written and the caller may fall back to the next method:
// the errno was one of ENOSYS, EXDEV, EINVAL, EOPNOTSUPP, EPERM, EBADF,
// ETXTBSY or ENOTTY (and EIO from copy_file_range, which some FUSE, NFS
// and CIFS servers return for "unsupported"), or copy_file_range returned 0 before copying anything
// (kernels before 5.19 do so across filesystems). Any other error, or an
// "unsupported" errno after data has moved (ErrPartial), is a real failure
// that no fallback may hide.
//
// Calls retry EINTR, reach descriptors through internal/rawfd (never Fd, which
// would put the file in blocking mode), and cap one copy_file_range at
// MaxCopyRange. On systems other than Linux nothing is handled and the
// read/write fallback does all the work.
package kcopy
