package bytesize

import (
	"fmt"
	"strconv"
	"strings"
)

// Parse reads a byte count a person wrote: a whole number with an optional
// binary suffix K, M, G or T (powers of 1024), also spelled KB, KiB or Ki,
// in any case, surrounding spaces ignored. Zero is a count like any other:
// a caller that needs a positive one (a volume size) checks that itself.
func Parse(s string) (int64, error) {
	t := strings.TrimSuffix(strings.TrimSuffix(strings.ToUpper(strings.TrimSpace(s)), "B"), "I")
	mult := int64(1)
	if n := len(t); n > 0 {
		if i := strings.IndexByte("KMGT", t[n-1]); i >= 0 {
			mult = int64(1) << (10 * (i + 1))
			t = t[:n-1]
		}
	}
	n, err := strconv.ParseInt(t, 10, 64)
	if err != nil || n < 0 || n > (1<<62)/mult {
		return 0, fmt.Errorf("invalid size %q", s)
	}
	return n * mult, nil
}
