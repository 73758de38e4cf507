package qos

import (
	"errors"
	"fmt"
	"strings"

	"github.com/sparsesync/sparsesync/internal/bytesize"
)

// ErrBadRate is returned by ParseRate.
var ErrBadRate = errors.New("qos: bad rate")

// RateSyntax says how ParseRate reads a rate, for help texts and errors.
const RateSyntax = "bytes per second: " + bytesize.Syntax + "; 0 means unlimited"

// ParseRate reads a rate in bytes per second (see RateSyntax): "0",
// "500K", "1.5M", "100MiB", "1GB". A trailing "/s" is allowed.
func ParseRate(s string) (int64, error) {
	n, err := bytesize.Parse(strings.TrimSuffix(strings.TrimSpace(s), "/s"))
	if err != nil {
		return 0, fmt.Errorf("%w %q: want %s", ErrBadRate, s, RateSyntax)
	}
	return n, nil
}
