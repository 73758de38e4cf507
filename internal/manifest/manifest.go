package manifest

import (
	"cmp"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"sync"
)

const (
	// Suffix names a destination's sidecar: DST + Suffix.
	Suffix = ".sparsesync"
	// MinBlockSize is the smallest digest block; a sync digests blocks of
	// max(MinBlockSize, its comparison block).
	MinBlockSize = 64 << 10
	// MaxEntries bounds the ranges one manifest records (128 MiB in memory
	// while a sync builds it).
	MaxEntries = 4 << 20
	// TagLen is the length of a digest.
	TagLen = 16
	keyLen = 32
	idLen  = 16
)

// ErrInvalid reports a sidecar that is not a manifest this sync can use:
// damaged, of another format, owned by someone else, readable by others,
// or not the one the destination's mark names.
var ErrInvalid = errors.New("invalid manifest")

// Tag is one block's digest.
type Tag [TagLen]byte

// Entry is the digest of the bytes [Off, Off+Len): a whole digest block,
// or the part of one that a compared range covered (a data extent that
// starts or ends inside the block). A range never crosses a block edge.
type Entry struct {
	Off, Len int64
	Tag      Tag
}

// Manifest is the digests of one version of a destination.
type Manifest struct {
	// ID names the manifest in the destination's mark.
	ID string
	// BlockSize is the digest block.
	BlockSize int64
	// Size is the destination's size the digests were taken at.
	Size    int64
	key     [keyLen]byte
	entries []Entry // sorted by Off, not overlapping
}

// Len is the number of ranges the manifest covers.
func (m *Manifest) Len() int { return len(m.entries) }

// Lookup returns the digest of the range [off, off+n), if the manifest
// has one for exactly that range.
func (m *Manifest) Lookup(off, n int64) (Tag, bool) {
	k, ok := slices.BinarySearchFunc(m.entries, off, func(e Entry, off int64) int { return cmp.Compare(e.Off, off) })
	if !ok || m.entries[k].Len != n {
		return Tag{}, false
	}
	return m.entries[k].Tag, true
}

// Covers reports whether a range of the manifest starts in [lo, hi).
func (m *Manifest) Covers(lo, hi int64) bool {
	k, _ := slices.BinarySearchFunc(m.entries, lo, func(e Entry, off int64) int { return cmp.Compare(e.Off, off) })
	return k < len(m.entries) && m.entries[k].Off < hi
}

// Digester computes tags under one key. It reuses its state; it is not
// safe for concurrent use (one per goroutine).
type Digester struct {
	g     cipher.AEAD
	nonce [12]byte
	out   []byte
}

func newDigester(key []byte) (*Digester, error) {
	b, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("manifest key: %w", err)
	}
	g, err := cipher.NewGCM(b)
	if err != nil {
		return nil, fmt.Errorf("manifest key: %w", err)
	}
	return &Digester{g: g, out: make([]byte, 0, TagLen)}, nil
}

// Sum returns the tag of the range of the file at off that holds b (at
// most 4 GiB), under the nonce off and len(b).
func (d *Digester) Sum(off int64, b []byte) Tag {
	binary.LittleEndian.PutUint64(d.nonce[:8], uint64(off))
	binary.LittleEndian.PutUint32(d.nonce[8:], uint32(len(b)))
	d.out = d.g.Seal(d.out[:0], d.nonce[:], nil, b)
	return Tag(d.out)
}

// Recorder collects the digests of a sync's compared blocks, from many
// workers at once, into the next manifest.
type Recorder struct {
	bs  int64
	key [keyLen]byte

	mu      sync.Mutex
	entries []Entry
	over    bool
}

// NewRecorder starts the next manifest: under prev's key and block size
// when prev is not nil (so that the digests a sync computes serve both to
// check prev and to record), else under a new random key.
func NewRecorder(prev *Manifest, blockSize int64) (*Recorder, error) {
	if prev != nil {
		return &Recorder{bs: prev.BlockSize, key: prev.key}, nil
	}
	if blockSize < MinBlockSize || blockSize&(blockSize-1) != 0 {
		return nil, fmt.Errorf("manifest block size %d: not a power of two of at least %d", blockSize, MinBlockSize)
	}
	r := &Recorder{bs: blockSize}
	if _, err := rand.Read(r.key[:]); err != nil {
		return nil, err
	}
	return r, nil
}

// BlockSize is the digest block.
func (r *Recorder) BlockSize() int64 { return r.bs }

// Digester returns a digester under the recorder's key, for one goroutine.
func (r *Recorder) Digester() (*Digester, error) { return newDigester(r.key[:]) }

// Add records digests (one worker's piece at a time). Past MaxEntries the
// recorder gives up and keeps nothing.
func (r *Recorder) Add(es []Entry) {
	if len(es) == 0 {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.over {
		return
	}
	if len(r.entries)+len(es) > MaxEntries {
		r.over, r.entries = true, nil
		return
	}
	r.entries = append(r.entries, es...)
}

// Manifest returns what was recorded as a manifest of a destination of
// size bytes under a new ID; ok is false when nothing was recorded or the
// recorder gave up. The recorded ranges must not overlap (a sync compares
// each byte once); a range recorded twice keeps its later entry.
func (r *Recorder) Manifest(size int64) (m *Manifest, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.over || len(r.entries) == 0 {
		return nil, false
	}
	es := r.entries
	slices.SortStableFunc(es, func(a, b Entry) int { return cmp.Compare(a.Off, b.Off) })
	out := es[:0]
	for _, e := range es {
		if n := len(out); n > 0 && out[n-1].Off == e.Off {
			out[n-1] = e
			continue
		}
		out = append(out, e)
	}
	var id [idLen]byte
	if _, err := rand.Read(id[:]); err != nil {
		return nil, false
	}
	r.entries = nil
	return &Manifest{ID: hex.EncodeToString(id[:]), BlockSize: r.bs, Size: size, key: r.key, entries: out}, true
}
