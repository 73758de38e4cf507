package tcpsync

import (
	"fmt"
	"io"

	"github.com/sparsesync/sparsesync/internal/wire"
)

// frameBuf buffers the frames a framer writes, laid out as they go on the
// wire. A frame is placed whole, so its body tag is computed over the
// buffer in place: the header is put where the header tag goes, directly
// before the body, the tag computed over header ‖ body, then the header
// tag put back. No frame is gathered into a second buffer for its tag
// (AES-GMAC takes its message as one slice).
type frameBuf struct {
	dst io.Writer
	b   []byte // the buffered bytes; cap is the flush threshold
	err error  // the first write error, for good (as bufio.Writer)
}

func newFrameBuf(dst io.Writer, size int) *frameBuf {
	return &frameBuf{dst: dst, b: make([]byte, 0, size)}
}

// Reset drops what is buffered and the error, and writes to dst from now on.
func (w *frameBuf) Reset(dst io.Writer) { w.dst, w.b, w.err = dst, w.b[:0], nil }

// Flush writes what is buffered.
func (w *frameBuf) Flush() error {
	if w.err != nil {
		return w.err
	}
	if len(w.b) == 0 {
		return nil
	}
	n, err := w.dst.Write(w.b)
	if err == nil && n < len(w.b) {
		err = io.ErrShortWrite
	}
	if err != nil {
		w.err = err
		return err
	}
	w.b = w.b[:0]
	return nil
}

// room returns n bytes at the end of the buffer for a frame, flushing
// first when they do not fit, and growing the buffer to grow bytes (at
// least n) when n is more than it holds (writeFrame passes grownBody's).
func (w *frameBuf) room(n, grow int) ([]byte, error) {
	if len(w.b)+n > cap(w.b) {
		if err := w.Flush(); err != nil {
			return nil, err
		}
		if n > cap(w.b) {
			w.b = make([]byte, 0, max(n, grow))
		}
	}
	p := len(w.b)
	w.b = w.b[:p+n]
	return w.b[p:], nil
}

// grownBody is the body a frame buffer is grown for, to hold a body of n
// bytes: a data frame's (over wire.MaxFrame) grows it to the largest frame
// at once, so a session's buffers are made once. Grown to each slightly
// larger DATA frame, they were a fresh megabyte several times a push, and
// each page's first touch costs (about 20 us on a VM).
func grownBody(n int) int {
	if n > wire.MaxFrame {
		return wire.MaxBody
	}
	return n
}

// writeFrame buffers one frame; parts are concatenated into its body.
func (f *framer) writeFrame(t wire.Type, flags uint8, parts ...[]byte) error {
	n := 0
	for _, p := range parts {
		n += len(p)
	}
	if n > t.Limit() {
		return fmt.Errorf("internal: %s frame of %d bytes over the limit", t, n)
	}
	wire.PutHeader(&f.whdr, t, flags, n)
	most := grownBody(n)
	if f.smac == nil {
		b, err := f.w.room(wire.HeaderLen+n, wire.HeaderLen+most)
		if err != nil {
			return fmt.Errorf("writing %s: %w", t, err)
		}
		copy(b, f.whdr[:])
		gather(b[wire.HeaderLen:], parts)
		return nil
	}
	// header | header tag | body | body tag, with header ‖ body laid out
	// from the header tag's place while the body tag is computed.
	b, err := f.w.room(wire.HeaderLen+wire.HeaderTagLen+n+wire.BodyTagLen, wire.HeaderLen+wire.HeaderTagLen+most+wire.BodyTagLen)
	if err != nil {
		return fmt.Errorf("writing %s: %w", t, err)
	}
	var htag [wire.HeaderTagLen]byte
	copy(htag[:], f.smac.HeaderTag(f.whdr[:]))
	msg := b[wire.HeaderLen : 2*wire.HeaderLen+n]
	copy(msg, f.whdr[:])
	gather(msg[wire.HeaderLen:], parts)
	copy(b[len(b)-wire.BodyTagLen:], f.smac.FrameTag(msg))
	copy(b, f.whdr[:])
	copy(b[wire.HeaderLen:], htag[:])
	return nil
}

// gather copies parts into b, one after the other.
func gather(b []byte, parts [][]byte) {
	for _, p := range parts {
		b = b[copy(b, p):]
	}
}
