package main

import (
	"fmt"
	"strings"

	"github.com/sparsesync/sparsesync/tcpsync"
)

const rebuildMoreRemotesHelp = `
Several healthy copies: --remote repeated, the second and later ones as
ADDR/DIR (DIR the copy's directory beneath that server's root; default
--remote-dir), fetches the disk images from all of them at once over TCP
(see pull --from), each piece checked against the version the first
--remote serves, whose metadata the target gets; a copy holding another
version is dropped with a warning, one that fails loses its pieces to the
others. The first --remote may be ADDR/DIR too (--remote ADDR --remote-dir DIR).
`

// remotesFlag is replica rebuild's --remote: the first value is the
// server (ADDR or ADDR/DIR), the later ones more healthy copies.
type remotesFlag struct {
	first, firstDir *string
	more            *[]string
}

func (r *remotesFlag) String() string {
	if r.first == nil {
		return ""
	}
	return strings.Join(append([]string{*r.first}, *r.more...), ",")
}

func (r *remotesFlag) Set(v string) error {
	if *r.first != "" {
		*r.more = append(*r.more, v)
		return nil
	}
	addr, dir, ok := strings.Cut(v, "/")
	*r.first = addr
	if ok {
		*r.firstDir = dir
	}
	return nil
}

func (r *remotesFlag) Type() string { return "ADDR[/DIR]" }

// moreRemotes parses the second and later --remote values.
func moreRemotes(vals []string, defaultDir string) ([]tcpsync.MultiSource, error) {
	var out []tcpsync.MultiSource
	for _, v := range vals {
		addr, dir, ok := strings.Cut(v, "/")
		if !ok || dir == "" {
			dir = defaultDir
		}
		if err := checkAddr("replica rebuild: --remote", addr); err != nil {
			return nil, err
		}
		if err := tcpsync.ValidateName(dir); err != nil {
			return nil, usageError{fmt.Errorf("replica rebuild: --remote %q: %w", v, err)}
		}
		out = append(out, tcpsync.MultiSource{Addr: addr, Remote: dir})
	}
	return out, nil
}
