package bytesize

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Syntax says how Parse reads a byte count, for help texts and errors.
const Syntax = "a number of bytes with an optional suffix K, M, G or T (powers of 1024, as rsync reads them; " +
	"KiB, MiB, GiB, TiB too) or KB, MB, GB, TB (powers of 1000), in any case; fractions allowed (1.5M)"

// units are Parse's suffixes, longest first (upper case).
var units = [...]struct {
	suffix string
	mult   float64
}{
	{"KIB", 1 << 10}, {"MIB", 1 << 20}, {"GIB", 1 << 30}, {"TIB", 1 << 40},
	{"KI", 1 << 10}, {"MI", 1 << 20}, {"GI", 1 << 30}, {"TI", 1 << 40},
	{"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12},
	{"K", 1 << 10}, {"M", 1 << 20}, {"G", 1 << 30}, {"T", 1 << 40},
	{"B", 1},
}

// Parse reads a byte count a person wrote (see Syntax): "0", "4096",
// "500K", "1.5M", "100MiB", "1GB"; surrounding spaces are ignored. It is
// the one reader of sizes and rates (qos.ParseRate adds "/s"). Zero is a
// count like any other: a caller that needs a positive one checks that
// itself. A fraction is rounded to whole bytes; a nonzero count that
// rounds to zero bytes is refused.
func Parse(s string) (int64, error) {
	t := strings.ToUpper(strings.TrimSpace(s))
	mult := 1.0
	for _, u := range units {
		if strings.HasSuffix(t, u.suffix) {
			t, mult = strings.TrimSuffix(t, u.suffix), u.mult
			break
		}
	}
	if !decimal(t) {
		return 0, fmt.Errorf("invalid size %q", s)
	}
	v, err := strconv.ParseFloat(t, 64)
	if err != nil || v*mult >= 1<<62 {
		return 0, fmt.Errorf("invalid size %q", s)
	}
	n := int64(math.Round(v * mult))
	if v > 0 && n == 0 {
		return 0, fmt.Errorf("invalid size %q: less than a byte", s)
	}
	return n, nil
}

// decimal reports whether t is digits with at most one decimal point
// between digits: no sign, exponent, hex or separator.
func decimal(t string) bool {
	whole, frac, dot := strings.Cut(t, ".")
	digits := func(p string) bool {
		for _, c := range p {
			if c < '0' || c > '9' {
				return false
			}
		}
		return p != ""
	}
	return digits(whole) && (!dot || digits(frac))
}
