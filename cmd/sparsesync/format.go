package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"strconv"
)

// checkAddr refuses an address that is not host:port, or whose numeric
// port is out of range, as bad usage (exit status 2), before anything is
// dialled or bound. what names it in the message ("--listen", "ADDR").
// A host or a named port that does not resolve is left to the dial or
// listen (a failure, exit status 1).
func checkAddr(what, addr string) error {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return usageError{fmt.Errorf("%s %q: want host:port", what, addr)}
	}
	if n, err := strconv.Atoi(port); port == "" || err == nil && (n < 0 || n > 65535) {
		return usageError{fmt.Errorf("%s %q: port out of range 0-65535", what, addr)}
	}
	return nil
}

func percent(part, whole int64) string {
	if whole == 0 {
		return "0%"
	}
	return fmt.Sprintf("%.2f%%", 100*float64(part)/float64(whole))
}

// writeJSONLine is the one JSON emitter of every --json output: v as one
// compact object and a newline (a stream of them is JSON Lines, as the
// disks agent's events are), with <, > and & written as they are, not as
// \u003c escapes, so paths and "->" stay readable.
func writeJSONLine(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// plural picks the word that agrees with n ("1 layer", "3 layers").
func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
