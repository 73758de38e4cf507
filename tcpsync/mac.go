package tcpsync

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
)

// ErrIntegrity means a frame after the handshake failed its authentication
// tag: it was changed, dropped, reordered, replayed or forged on the way.
// Nothing of it was used.
var ErrIntegrity = errors.New("tcpsync: integrity check failed: a frame was changed on the way")

// Frame authentication. After the handshake every frame carries two
// HMAC-SHA256 tags under a key per direction, derived from the token and
// the transcript (both nonces, and the TLS exporter when there is TLS):
//
//	header (8) | header tag (8) | body | body tag (16)
//	header tag = HMAC(key, "H" ‖ seq ‖ header)[:8]
//	body tag   = HMAC(key, "B" ‖ seq ‖ header ‖ body)[:16]
//
// seq counts the frames of the direction from 0, so a dropped, replayed
// or reordered frame fails like a changed one. The header tag is checked
// before the length is trusted: a changed length is caught at once, never
// read as a wait for bytes that do not come.
const (
	headerTagLen = 8
	bodyTagLen   = 16
)

// macer computes one direction's tags.
type macer struct {
	h   hash.Hash
	seq uint64
	sum []byte
	pre [9]byte
}

func newMacer(key []byte) *macer { return &macer{h: hmac.New(sha256.New, key)} }

func (m *macer) start(kind byte, hdr []byte) {
	m.h.Reset()
	m.pre[0] = kind
	binary.LittleEndian.PutUint64(m.pre[1:], m.seq)
	m.h.Write(m.pre[:])
	m.h.Write(hdr)
}

func (m *macer) headerTag(hdr []byte) []byte {
	m.start('H', hdr)
	m.sum = m.h.Sum(m.sum[:0])
	return m.sum[:headerTagLen]
}

// bodyTag returns the body tag and moves to the next frame.
func (m *macer) bodyTag(hdr []byte, parts ...[]byte) []byte {
	m.start('B', hdr)
	for _, p := range parts {
		m.h.Write(p)
	}
	m.sum = m.h.Sum(m.sum[:0])
	m.seq++
	return m.sum[:bodyTagLen]
}

func integrityErr(what string, seq uint64) error {
	return fmt.Errorf("%w (%s of frame %d)", ErrIntegrity, what, seq)
}

// digestSeed derives the key of the end-to-end digest from the session
// seed (itself secret to anyone without the token).
func digestSeed(seed uint64) uint64 {
	s := sha256.Sum256(binary.LittleEndian.AppendUint64([]byte("tcpsync/1 digest"), seed))
	return binary.LittleEndian.Uint64(s[:])
}
