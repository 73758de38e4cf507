// Package rawfd reaches the raw descriptor of a file or socket the one way
// the module allows: through SyscallConn().Control, never Fd (which puts the
// descriptor in blocking mode and lets a finalizer close it under a running
// call). Control keeps the descriptor open for as long as fn runs.
//
// It is pure standard library, below every package that makes system calls.
package rawfd
