package tcpsync

import (
	"fmt"
	"strings"

	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// Compression selects how DATA frames are compressed.
type Compression int

const (
	// CompressAuto compresses with zstd only while the network, not the
	// CPU, is the bottleneck (the sender is blocked on the socket).
	CompressAuto Compression = iota
	// CompressNone sends raw bytes.
	CompressNone
	// CompressLZ4 uses LZ4 blocks: low CPU, moderate ratio.
	CompressLZ4
	// CompressZstd uses zstd level 1 (SpeedFastest).
	CompressZstd
)

func (c Compression) String() string {
	switch c {
	case CompressAuto:
		return "auto"
	case CompressNone:
		return "none"
	case CompressLZ4:
		return "lz4"
	case CompressZstd:
		return "zstd"
	}
	return fmt.Sprintf("Compression(%d)", int(c))
}

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
const keepNum, keepDen = 97, 100

// encoder compresses DATA payloads; one per sending goroutine.
type encoder struct {
	zs *zstd.Encoder
	lz lz4.Compressor
}

// compress returns the payload to send and its codec flag; dst is scratch
// space of at least lz4.CompressBlockBound(len(raw)) bytes.
func (e *encoder) compress(c Compression, raw, dst []byte) ([]byte, uint8) {
	limit := len(raw) * keepNum / keepDen
	switch c {
	case CompressLZ4:
		n, err := e.lz.CompressBlock(raw, dst[:cap(dst)])
		if err == nil && n > 0 && n < limit {
			return dst[:n], flagCodecLZ4
		}
	case CompressZstd:
		if e.zs == nil {
			e.zs, _ = zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderConcurrency(1),
				zstd.WithWindowSize(maxDataPayload), zstd.WithEncoderCRC(false), zstd.WithZeroFrames(true))
		}
		out := e.zs.EncodeAll(raw, dst[:0])
		if len(out) < limit && cap(out) == cap(dst) {
			return out, flagCodecZstd
		}
	}
	return raw, 0
}

func (e *encoder) close() {
	if e.zs != nil {
		_ = e.zs.Close()
	}
}

// decoder decompresses DATA payloads with our limits, never the peer's: one
// goroutine, a window of at most one frame, output exactly rawLen bytes.
type decoder struct {
	zs *zstd.Decoder
}

func (d *decoder) decompress(flags uint8, payload []byte, rawLen int, dst []byte) ([]byte, error) {
	switch flags & flagCodecMask {
	case 0:
		if len(payload) != rawLen {
			return nil, fmt.Errorf("%w: raw DATA of %d bytes announced as %d", ErrProtocol, len(payload), rawLen)
		}
		return payload, nil
	case flagCodecLZ4:
		n, err := lz4.UncompressBlock(payload, dst[:rawLen])
		if err != nil || n != rawLen {
			return nil, fmt.Errorf("%w: bad lz4 DATA (%d of %d bytes): %v", ErrProtocol, n, rawLen, err)
		}
		return dst[:rawLen], nil
	case flagCodecZstd:
		if d.zs == nil {
			var err error
			d.zs, err = zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderLowmem(true),
				zstd.WithDecoderMaxMemory(2*maxDataPayload), zstd.WithDecoderMaxWindow(maxDataPayload))
			if err != nil {
				return nil, fmt.Errorf("zstd decoder: %w", err)
			}
		}
		out, err := d.zs.DecodeAll(payload, dst[:0])
		if err != nil || len(out) != rawLen || cap(out) != cap(dst) {
			return nil, fmt.Errorf("%w: bad zstd DATA (%d of %d bytes): %v", ErrProtocol, len(out), rawLen, err)
		}
		return out, nil
	}
	return nil, fmt.Errorf("%w: unknown codec in DATA flags %#x", ErrProtocol, flags)
}

func (d *decoder) close() {
	if d.zs != nil {
		d.zs.Close()
	}
}
