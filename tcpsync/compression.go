package tcpsync

import (
	"fmt"
	"strings"

	"github.com/sparsesync/sparsesync/internal/wire"
)

// Compression selects how DATA frames are compressed.
type Compression int

//go:generate go run golang.org/x/tools/cmd/stringer@v0.52.0 -type=Compression -linecomment

const (
	// CompressAuto compresses with zstd only while the network, not the
	// CPU, is the bottleneck (the sender is blocked on the socket).
	CompressAuto Compression = iota // auto
	// CompressNone sends raw bytes.
	CompressNone // none
	// CompressLZ4 uses LZ4 blocks: low CPU, moderate ratio.
	CompressLZ4 // lz4
	// CompressZstd uses zstd level 1 (SpeedFastest).
	CompressZstd // zstd
)

// ParseCompression parses "auto", "none", "lz4" or "zstd".
func ParseCompression(s string) (Compression, error) {
	for c := CompressAuto; c <= CompressZstd; c++ {
		if strings.EqualFold(s, c.String()) {
			return c, nil
		}
	}
	return 0, fmt.Errorf("unknown compression %q (want auto, none, lz4 or zstd)", s)
}

// A frame is sent compressed only if it shrinks below this fraction (97%).

// codec is the DATA codec flag that c asks the wire's encoder to try
// (CompressAuto has decided by the time a frame is sent: none).
func (c Compression) codec() uint8 {
	switch c {
	case CompressLZ4:
		return wire.FlagCodecLZ4
	case CompressZstd:
		return wire.FlagCodecZstd
	}
	return 0
}

// encoder compresses DATA payloads as a Compression says; one per sending
// goroutine.
type encoder struct{ e wire.Encoder }

// compress returns the payload to send and its codec flag; dst is scratch
// space of at least lz4.CompressBlockBound(len(raw)) bytes.
func (e *encoder) compress(c Compression, raw, dst []byte) ([]byte, uint8) {
	return e.e.Compress(c.codec(), raw, dst)
}

func (e *encoder) close() { e.e.Close() }
