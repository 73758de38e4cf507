package tcpsync

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"syscall"

	"github.com/sparsesync/sparsesync/internal/wire"
)

// opList asks the server for the names of the regular files in a
// directory beneath its root (OPEN op 3); OPENED carries them.
const opList = 3

// The limits of one listing: it fits one OPENED frame.
const (
	maxListNames = 4096
	maxListBytes = wire.MaxFrame - 1024
)

// ErrListTooLong is returned for a directory whose listing does not fit
// the limits (4096 names, about 63 KiB).
var ErrListTooLong = errors.New("tcpsync: directory listing over the limit")

// List returns, sorted, the names of the regular files in the directory dir
// beneath the server's root: what a replica rebuild needs to find the disks
// no chain names (the snapshots of an abandoned branch). Names that are
// symlinks, directories, special files, hard-linked, or not valid remote
// names (ValidateName) are left out. The directory itself is resolved as a
// push or pull target's directories are: no symlink on the path.
func List(ctx context.Context, addr, dir string, o *Options) ([]string, error) {
	if err := ValidateName(dir); err != nil {
		return nil, err
	}
	var names []string
	_, err := withRetries(ctx, addr, o, func(ctx context.Context, c *Options, f *framer, seed uint64) (Stats, error) {
		if err := f.send(wire.Open, 0, openBody(opList, 0, 0, dir)); err != nil {
			return Stats{}, err
		}
		_, body, err := f.expect(wire.Opened)
		if err != nil {
			return Stats{}, err
		}
		names, err = decodeList(body)
		return Stats{Verified: true}, err
	})
	return names, err
}

func decodeList(body []byte) ([]string, error) {
	d := wire.Dec{B: body, T: wire.Opened}
	n := d.U32()
	if d.Err == nil && n > maxListNames {
		return nil, fmt.Errorf("%w: listing of %d names (limit %d)", ErrProtocol, n, maxListNames)
	}
	names := make([]string, 0, min(n, maxListNames))
	for range n {
		name := string(d.Bytes(wire.MaxComponent))
		if d.Err != nil {
			return nil, d.Err
		}
		if err := ValidateName(name); err != nil {
			return nil, fmt.Errorf("%w: listed name: %w", ErrProtocol, err)
		}
		names = append(names, name)
	}
	if err := d.End(); err != nil {
		return nil, err
	}
	return names, nil
}

// listDir returns the OPENED body for a listing of dir.
func (s *Server) listDir(ctx context.Context, dir string) ([]byte, error) {
	if err := ValidateName(dir); err != nil {
		return nil, err
	}
	// The directories on the way and dir itself: none a symlink.
	if _, err := s.walkDirs(ctx, dir+"/x", false); err != nil {
		return nil, err
	}
	d, err := s.root.Open(dir)
	if err != nil {
		return nil, pathErr(sanitize(dir), err)
	}
	defer d.Close()
	ents, err := d.ReadDir(-1)
	if err != nil {
		return nil, pathErr(sanitize(dir), err)
	}
	var names []string
	size := 4
	for _, e := range ents {
		if !e.Type().IsRegular() || ValidateName(e.Name()) != nil {
			continue
		}
		if fi, err := e.Info(); err != nil || !fi.Mode().IsRegular() || multiLinked(fi) {
			continue
		}
		names = append(names, e.Name())
		size += 4 + len(e.Name())
		if len(names) > maxListNames || size > maxListBytes {
			return nil, fmt.Errorf("%w: %q", ErrListTooLong, sanitize(dir))
		}
	}
	slices.Sort(names)
	b := binary.LittleEndian.AppendUint32(make([]byte, 0, size), uint32(len(names)))
	for _, n := range names {
		b = wire.AppendBytes(b, []byte(n))
	}
	return b, nil
}

// multiLinked reports whether the file has more than one hard link (the
// jail's rule: a link inside the root may name a file outside it).
func multiLinked(fi fs.FileInfo) bool {
	sys, ok := fi.Sys().(*syscall.Stat_t)
	return ok && sys.Nlink > 1
}
