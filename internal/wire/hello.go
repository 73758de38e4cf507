package wire

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"fmt"
)

const (
	// Version is the protocol version a HELLO announces. 2: frames after
	// the handshake carry tags (mac.go).
	Version = 2
	// HelloLen is the length of a HELLO body: magic, version, features,
	// nonce.
	HelloLen = 4 + 1 + 4 + 32
)

// Feature bits of a HELLO. A feature is used when both HELLOs announce it,
// unless said otherwise.
const (
	// FeatNoAuth, set by a server, says it authenticates nobody (loopback only).
	FeatNoAuth = 1 << 0
	// FeatKeepalive says the peer understands PROGRESS frames, which a
	// receiver sends while it reads its target back (both sides set it).
	FeatKeepalive = 1 << 1
	// FeatWorked says the peer understands PROGRESS frames with
	// FlagWorked, which a receiver holding to a bandwidth budget sends
	// while it works at the budget's pace (both sides set it).
	FeatWorked = 1 << 2
	// FeatWideMaps says the peer takes extent maps of more than
	// MaxExtents entries, bounded only by its session memory budget
	// (both sides set it). Without it a map carries at most MaxExtents.
	FeatWideMaps = 1 << 4
	// FeatWindows says the peer walks the file in windows of the two maps
	// (WINDOW frames, window.go) instead of sending whole maps (both
	// sides set it): a session's memory no longer grows with the extent
	// count.
	FeatWindows = 1 << 5
	// FeatGMAC says the peer tags frames with AES-GMAC (mac.go); when
	// both sides set it they do, else with HMAC-SHA256.
	FeatGMAC = 1 << 6
	// FeatBusy says the peer takes PROGRESS frames with FlagBusy, which
	// either side sends while it is in a long phase that counts no byte
	// (tcpsync's busy.go); both sides set it.
	FeatBusy = 1 << 7
	// FeatPieceMaps says the peer serves and takes a multi-source fetch
	// with piece maps (both sides set it): the manifest names each piece
	// by its range [lo, hi), its block count and a sum over its map and
	// data, and a piece's map crosses (a WINDOW frame) only when the
	// piece is fetched, so no whole map crosses and a client's memory
	// does not grow with the extent count.
	FeatPieceMaps = 1 << 8
	// FeatBatch says the peer takes BATCH frames (batch.go): many small
	// data ranges in one frame (both sides set it). A peer without it gets
	// a DATA frame per range.
	FeatBatch = 1 << 9
)

// magic starts every HELLO.
var magic = [4]byte{'T', 'S', 'Y', 'N'}

// HelloMsg is the body of a HELLO frame.
type HelloMsg struct {
	Version  uint8    // the protocol version (Version)
	Features uint32   // the Feat bits the sender announces
	Nonce    [32]byte // random, one per handshake: the transcript's freshness
}

// NewHello returns our HELLO announcing features, with a fresh random
// nonce.
func NewHello(features uint32) HelloMsg {
	h := HelloMsg{Version: Version, Features: features}
	_, _ = rand.Read(h.Nonce[:])
	return h
}

// Marshal returns the HELLO body.
func (h HelloMsg) Marshal() []byte {
	b := append([]byte(nil), magic[:]...)
	b = append(b, h.Version)
	b = binary.LittleEndian.AppendUint32(b, h.Features)
	return append(b, h.Nonce[:]...)
}

// ParseHello decodes a HELLO body: ErrProtocol if it is none, ErrVersion
// if the peer speaks another version.
func ParseHello(b []byte) (HelloMsg, error) {
	var h HelloMsg
	if len(b) != HelloLen || !bytes.Equal(b[:4], magic[:]) {
		return h, fmt.Errorf("%w: not a tcpsync peer (bad HELLO)", ErrProtocol)
	}
	h.Version = b[4]
	h.Features = binary.LittleEndian.Uint32(b[5:])
	copy(h.Nonce[:], b[9:])
	if h.Version != Version {
		return h, fmt.Errorf("%w: peer speaks version %d, we speak %d", ErrVersion, h.Version, Version)
	}
	return h, nil
}
