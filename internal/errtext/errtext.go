package errtext

import (
	"slices"
	"strings"
)

// Packages are the packages of the module whose sentinels carry their name.
// TestPackagesListsEverySentinel keeps it in step with the tree.
var Packages = []string{
	"tcpsync", "localsync", "replica", "sparse", "target", "disks", "qos", "ganeti", "longhorn", "bench",
	"coldread", "destplan", "dirlock", "kcopy",
}

// Strip leaves out of msg (err's text, or a rendering of it) the package
// name of every sentinel in err's tree, at the last place the sentinel's
// text occurs, and reports whether msg began with such a sentinel.
func Strip(msg string, err error) (out string, leading bool) {
	for _, s := range sentinels(err, nil) {
		text := s.Error()
		pkg, bare, ok := strings.Cut(text, ": ")
		if !ok || !slices.Contains(Packages, pkg) {
			continue
		}
		if i := strings.LastIndex(msg, text); i >= 0 {
			leading = leading || i == 0
			msg = msg[:i] + bare + msg[i+len(text):]
		}
	}
	return msg, leading
}

// sentinels appends the errors in err's tree that wrap nothing (the
// sentinels, whose text is all their own) to dst.
func sentinels(err error, dst []error) []error {
	switch u := err.(type) {
	case interface{ Unwrap() error }:
		if inner := u.Unwrap(); inner != nil {
			return sentinels(inner, dst)
		}
	case interface{ Unwrap() []error }:
		for _, e := range u.Unwrap() {
			dst = sentinels(e, dst)
		}
		return dst
	}
	if err == nil {
		return dst
	}
	return append(dst, err)
}
