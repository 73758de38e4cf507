package tcpsync

import (
	"crypto/sha256"
	"encoding/binary"

	"github.com/cespare/xxhash/v2"
)

// digest is the end-to-end check of one chunk (and, summed, of the file):
// over every non-zero block of the result, mix(offset, length, xxhash64 of
// the bytes keyed with the session's digest seed), accumulated two ways.
// The key (digestSeed, from the token and both nonces) is secret to anyone
// without the token, so a writer of the data cannot craft blocks whose
// digests collide. Both sides compute it from
// the pass they already make (the sender's read, the receiver's compare
// read and the bytes it receives), so verification costs no extra I/O; the
// order of accumulation does not matter. Zero blocks and holes contribute
// nothing, so only logical content counts.
type digest struct{ a, b uint64 }

// digestKey hashes blocks for the digest; one per goroutine.
type digestKey struct {
	h    *xxhash.Digest
	seed uint64
}

func newDigestKey(sessionSeed uint64) *digestKey {
	s := digestSeed(sessionSeed)
	return &digestKey{h: xxhash.NewWithSeed(s), seed: s}
}

func (k *digestKey) sum(b []byte) uint64 {
	k.h.ResetWithSeed(k.seed)
	_, _ = k.h.Write(b)
	return k.h.Sum64()
}

func (d *digest) addBlock(k *digestKey, off int64, data []byte) {
	d.addHash(off, len(data), k.sum(data))
}

func (d *digest) addHash(off int64, n int, h uint64) {
	var buf [24]byte
	binary.LittleEndian.PutUint64(buf[0:], uint64(off))
	binary.LittleEndian.PutUint64(buf[8:], uint64(n))
	binary.LittleEndian.PutUint64(buf[16:], h)
	m := xxhash.Sum64(buf[:])
	d.a += m
	d.b += m*m | 1
}

func (d *digest) add(o digest) { d.a += o.a; d.b += o.b }

// digestSeed derives the key of the end-to-end digest from the session
// seed (itself secret to anyone without the token).
func digestSeed(seed uint64) uint64 {
	s := sha256.Sum256(binary.LittleEndian.AppendUint64([]byte("tcpsync/1 digest"), seed))
	return binary.LittleEndian.Uint64(s[:])
}
