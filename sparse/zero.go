package sparse

import "bytes"

// zeroes is a read-only page of zeros that IsZero compares against.
var zeroes [64 << 10]byte

// IsZero reports whether b holds only zero bytes. It compares against a
// block of zeros with the assembly memequal, so it runs at memory speed; use
// it to turn all-zero blocks back into holes.
func IsZero(b []byte) bool {
	for len(b) > 0 {
		n := min(len(b), len(zeroes))
		if !bytes.Equal(b[:n], zeroes[:n]) {
			return false
		}
		b = b[n:]
	}
	return true
}
