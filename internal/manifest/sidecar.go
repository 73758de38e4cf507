package manifest

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// The sidecar, all integers little-endian:
//
//	magic "SSMANIF2" | id (16) | key (32) | block size (8) | size (8) |
//	count (8) | count x (offset (8) | length (4) | tag (16)) |
//	SHA-256 of all before (32)
//
// The checksum catches a torn or damaged file (it is renamed into place
// without an fsync: a sidecar lost in a crash only costs the next re-sync
// its reads of the destination, never a wrong block).
const (
	magic      = "SSMANIF2"
	headerLen  = len(magic) + idLen + keyLen + 3*8
	entryLen   = 8 + 4 + TagLen
	trailerLen = sha256.Size
)

// Path is the sidecar of the destination dst.
func Path(dst string) string { return dst + Suffix }

// Save writes m as dst's sidecar: a new file (O_EXCL, mode 0600) in dst's
// directory renamed over the old sidecar, so that a reader sees the old
// manifest or the new one, and a name someone else placed there (a
// symbolic link included) is replaced, never followed.
func Save(dst string, m *Manifest) error {
	id, err := hex.DecodeString(m.ID)
	if err != nil || len(id) != idLen {
		return fmt.Errorf("%w: id %q", ErrInvalid, m.ID)
	}
	b := make([]byte, 0, headerLen+len(m.entries)*entryLen+trailerLen)
	b = append(b, magic...)
	b = append(b, id...)
	b = append(b, m.key[:]...)
	b = binary.LittleEndian.AppendUint64(b, uint64(m.BlockSize))
	b = binary.LittleEndian.AppendUint64(b, uint64(m.Size))
	b = binary.LittleEndian.AppendUint64(b, uint64(len(m.entries)))
	for _, e := range m.entries {
		b = binary.LittleEndian.AppendUint64(b, uint64(e.Off))
		b = binary.LittleEndian.AppendUint32(b, uint32(e.Len))
		b = append(b, e.Tag[:]...)
	}
	sum := sha256.Sum256(b)
	b = append(b, sum[:]...)

	var rnd [8]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		return err
	}
	tmp := filepath.Join(filepath.Dir(dst), "."+filepath.Base(dst)+Suffix+"-"+hex.EncodeToString(rnd[:]))
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, Path(dst))
	}
	if err != nil {
		os.Remove(tmp)
	}
	return err
}

// Load reads dst's sidecar and returns it if it is the manifest id, of
// digest blocks of blockSize, taken at size bytes. A sidecar that is
// missing returns an error matching fs.ErrNotExist; one that is damaged,
// another manifest, not a regular file, not owned by this user or open to
// others (whoever reads the key can craft collisions) returns ErrInvalid.
func Load(dst, id string, blockSize, size int64) (*Manifest, error) {
	p := Path(dst)
	f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		if errors.Is(err, syscall.ELOOP) {
			return nil, fmt.Errorf("%s: %w: a symbolic link", p, ErrInvalid)
		}
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() || fi.Mode().Perm()&0o077 != 0 || !ownedByMe(fi) {
		return nil, fmt.Errorf("%s: %w: not a regular file of mode 0600 owned by this user (%v)", p, ErrInvalid, fi.Mode())
	}
	max := int64(headerLen + MaxEntries*entryLen + trailerLen)
	if fi.Size() < int64(headerLen+trailerLen) || fi.Size() > max {
		return nil, fmt.Errorf("%s: %w: %d bytes", p, ErrInvalid, fi.Size())
	}
	b := make([]byte, fi.Size())
	if _, err := io.ReadFull(f, b); err != nil {
		return nil, &fs.PathError{Op: "read", Path: p, Err: err}
	}
	return decode(p, b, id, blockSize, size)
}

func decode(p string, b []byte, id string, blockSize, size int64) (*Manifest, error) {
	body, trailer := b[:len(b)-trailerLen], b[len(b)-trailerLen:]
	if sum := sha256.Sum256(body); string(sum[:]) != string(trailer) || string(body[:len(magic)]) != magic {
		return nil, fmt.Errorf("%s: %w: damaged or not a manifest", p, ErrInvalid)
	}
	r := body[len(magic):]
	m := &Manifest{ID: hex.EncodeToString(r[:idLen])}
	r = r[idLen:]
	copy(m.key[:], r[:keyLen])
	r = r[keyLen:]
	m.BlockSize = int64(binary.LittleEndian.Uint64(r))
	m.Size = int64(binary.LittleEndian.Uint64(r[8:]))
	n := binary.LittleEndian.Uint64(r[16:])
	r = r[24:]
	if m.ID != id || m.BlockSize != blockSize || m.Size != size {
		return nil, fmt.Errorf("%s: %w: manifest %s of %d-byte blocks at size %d, not %s of %d at %d",
			p, ErrInvalid, m.ID, m.BlockSize, m.Size, id, blockSize, size)
	}
	if n > MaxEntries || uint64(len(r)) != n*entryLen {
		return nil, fmt.Errorf("%s: %w: %d entries in %d bytes", p, ErrInvalid, n, len(r))
	}
	m.entries = make([]Entry, n)
	end := int64(0)
	for i := range m.entries {
		e := &m.entries[i]
		e.Off = int64(binary.LittleEndian.Uint64(r))
		e.Len = int64(binary.LittleEndian.Uint32(r[8:]))
		copy(e.Tag[:], r[12:entryLen])
		r = r[entryLen:]
		if e.Off < end || e.Len <= 0 || e.Off > size-e.Len || e.Off/blockSize != (e.Off+e.Len-1)/blockSize {
			return nil, fmt.Errorf("%s: %w: range %d+%d overlaps, crosses a block or passes the end", p, ErrInvalid, e.Off, e.Len)
		}
		end = e.Off + e.Len
	}
	return m, nil
}

// Remove removes dst's sidecar; a missing one is not an error.
func Remove(dst string) error {
	if err := os.Remove(Path(dst)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}
