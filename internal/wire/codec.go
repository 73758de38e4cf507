package wire

import (
	"fmt"

	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// A frame is sent compressed only if it shrinks below this fraction (97%).
const keepNum, keepDen = 97, 100

// Encoder compresses DATA payloads. The zero value is ready; one per
// sending goroutine (not safe for concurrent use). Close releases it.
type Encoder struct {
	zs *zstd.Encoder
	lz lz4.Compressor
}

// Compress returns the payload to send for raw and its codec flag:
// compressed with codec (FlagCodecLZ4 or FlagCodecZstd) if that shrinks it
// below 97%, else raw with flag 0 (so with codec 0). dst is scratch space
// of at least lz4.CompressBlockBound(len(raw)) bytes.
func (e *Encoder) Compress(codec uint8, raw, dst []byte) ([]byte, uint8) {
	limit := len(raw) * keepNum / keepDen
	switch codec {
	case FlagCodecLZ4:
		n, err := e.lz.CompressBlock(raw, dst[:cap(dst)])
		if err == nil && n > 0 && n < limit {
			return dst[:n], FlagCodecLZ4
		}
	case FlagCodecZstd:
		if e.zs == nil {
			e.zs, _ = zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderConcurrency(1),
				zstd.WithWindowSize(MaxDataPayload), zstd.WithEncoderCRC(false), zstd.WithZeroFrames(true))
		}
		out := e.zs.EncodeAll(raw, dst[:0])
		if len(out) < limit && cap(out) == cap(dst) {
			return out, FlagCodecZstd
		}
	}
	return raw, 0
}

// Close releases the encoder's zstd state.
func (e *Encoder) Close() {
	if e.zs != nil {
		_ = e.zs.Close()
	}
}

// Decoder decompresses DATA payloads with our limits, never the peer's:
// a window of at most one frame, output exactly rawLen bytes. The zero
// value is ready; one per receiving goroutine (not safe for concurrent
// use). Close releases it.
type Decoder struct {
	zs *zstd.Decoder
}

// Decompress returns the raw bytes of a DATA payload sent with flags,
// which must be rawLen bytes (ErrProtocol otherwise); dst is scratch space
// of at least rawLen bytes.
func (d *Decoder) Decompress(flags uint8, payload []byte, rawLen int, dst []byte) ([]byte, error) {
	switch flags & FlagCodecMask {
	case 0:
		if len(payload) != rawLen {
			return nil, fmt.Errorf("%w: raw DATA of %d bytes announced as %d", ErrProtocol, len(payload), rawLen)
		}
		return payload, nil
	case FlagCodecLZ4:
		n, err := lz4.UncompressBlock(payload, dst[:rawLen])
		if err != nil || n != rawLen {
			return nil, fmt.Errorf("%w: bad lz4 DATA (%d of %d bytes): %v", ErrProtocol, n, rawLen, err)
		}
		return dst[:rawLen], nil
	case FlagCodecZstd:
		if d.zs == nil {
			var err error
			d.zs, err = zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderLowmem(true),
				zstd.WithDecoderMaxMemory(2*MaxDataPayload), zstd.WithDecoderMaxWindow(MaxDataPayload))
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

// Close releases the decoder's zstd state.
func (d *Decoder) Close() {
	if d.zs != nil {
		d.zs.Close()
	}
}
