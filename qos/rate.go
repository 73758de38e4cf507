package qos

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// ErrBadRate is returned by ParseRate.
var ErrBadRate = errors.New("qos: bad rate")

// RateSyntax says how ParseRate reads a rate, for help texts and errors.
const RateSyntax = "bytes per second, with an optional suffix K, M, G or T (powers of 1024, as in rsync's --bwlimit; " +
	"KiB, MiB, GiB, TiB too) or KB, MB, GB, TB (powers of 1000); fractions allowed (1.5M); 0 means unlimited"

// ParseRate reads a rate in bytes per second (see RateSyntax): "0",
// "500K", "1.5M", "100MiB", "1GB". A trailing "/s" is allowed.
func ParseRate(s string) (int64, error) {
	bad := func() (int64, error) { return 0, fmt.Errorf("%w %q: want %s", ErrBadRate, s, RateSyntax) }
	t := strings.TrimSuffix(strings.TrimSpace(s), "/s")
	mult := 1.0
	for _, u := range []struct {
		suffix string
		mult   float64
	}{
		{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40},
		{"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12},
		{"K", 1 << 10}, {"M", 1 << 20}, {"G", 1 << 30}, {"T", 1 << 40},
		{"k", 1 << 10}, {"m", 1 << 20}, {"g", 1 << 30}, {"t", 1 << 40},
		{"B", 1},
	} {
		if strings.HasSuffix(t, u.suffix) {
			t, mult = strings.TrimSuffix(t, u.suffix), u.mult
			break
		}
	}
	if t == "" || strings.ContainsAny(t, "eEx_+-") { // no exponents, hex, signs or separators
		return bad()
	}
	v, err := strconv.ParseFloat(t, 64)
	if err != nil || math.IsNaN(v) || v < 0 || v*mult >= 1<<62 {
		return bad()
	}
	n := int64(math.Round(v * mult))
	if v > 0 && n == 0 {
		return bad() // a fraction of a byte per second
	}
	return n, nil
}
