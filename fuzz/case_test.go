package fuzz

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"strings"
)

// maxSize bounds the files a case makes: big enough for several 64 KiB
// blocks and chunked transfers, small enough for thousands of runs a minute.
const maxSize = 2 << 20

// thirdSize is the size of the file that layouts clone ranges from.
const thirdSize = 1 << 20

// opKind is what one step of a layout or change script does.
type opKind uint8

const (
	opData     opKind = iota // write pseudo-random bytes
	opZero                   // write zeros (all-zero data, not a hole)
	opPrealloc               // fallocate(KEEP_SIZE): unwritten extents
	opPunch                  // punch a hole
	opClone                  // FICLONERANGE from the third file (or a copy of its bytes)
	opTrunc                  // truncate to a new size (change scripts only)
	numOps
)

func (k opKind) String() string {
	return [...]string{"data", "zero", "prealloc", "punch", "clone", "trunc"}[k]
}

// op is one step. Clone ops read [From, From+Len) of the third file.
type op struct {
	Kind opKind
	Off  int64
	Len  int64
	From int64
	Seed uint64
}

func (o op) String() string {
	if o.Kind == opClone {
		return fmt.Sprintf("%v[%d,+%d)<-%d", o.Kind, o.Off, o.Len, o.From)
	}
	return fmt.Sprintf("%v[%d,+%d)", o.Kind, o.Off, o.Len)
}

// fcase is one decoded input.
type fcase struct {
	Size    int64
	Src     []op
	HasDst  bool
	DstSize int64
	Dst     []op
	Change  []op
	// Knobs pick among options that are not run in every combination
	// (the block size and atomic mode of a tcpsync run, a replica snapshot).
	Knobs uint8
	// Pick chooses the one option set a fuzzing run (go test -fuzz) tries
	// (see pick); the seed corpus tries them all.
	Pick uint8
}

func (c fcase) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "size %d src %v", c.Size, c.Src)
	if c.HasDst {
		fmt.Fprintf(&b, " dst(size %d) %v", c.DstSize, c.Dst)
	}
	if len(c.Change) > 0 {
		fmt.Fprintf(&b, " change %v", c.Change)
	}
	fmt.Fprintf(&b, " knobs %#x pick %d", c.Knobs, c.Pick)
	return b.String()
}

// reader hands out the fuzzer's bytes; past the end it returns zeros, so
// every input decodes.
type reader struct{ b []byte }

func (r *reader) u8() uint8 {
	if len(r.b) == 0 {
		return 0
	}
	v := r.b[0]
	r.b = r.b[1:]
	return v
}

func (r *reader) u16() uint16 { return uint16(r.u8())<<8 | uint16(r.u8()) }
func (r *reader) u24() uint32 { return uint32(r.u8())<<16 | uint32(r.u16()) }

// decode turns fuzzer bytes into a case. Layout:
//
//	flags u8                    bit0 destination, bit1 change script, bits 4-7 knobs
//	size  u24                   mod maxSize+1
//	nsrc  u8, ops               (count mod 12)
//	[dst size u24, ndst u8, ops]
//	[nchg u8, ops]
//	pick  u8                    the option set a fuzzing run tries
//
// An op is kind u8, off u24, len u16, from u8: kind's bit 3 aligns off and
// len to 4 KiB; the length unit is 1 byte, or 4 KiB when aligned; an
// unaligned length of 0xffff reaches the end of the file. Offsets are taken
// modulo the file's size (modulo maxSize in change scripts, whose ops are
// cut to the size the file has when they run).
func decode(in []byte) fcase {
	r := &reader{b: in}
	flags := r.u8()
	c := fcase{Knobs: flags >> 4}
	c.Size = int64(r.u24()) % (maxSize + 1)
	c.Src = decodeOps(r, c.Size, false)
	if flags&1 != 0 {
		c.HasDst = true
		c.DstSize = int64(r.u24()) % (maxSize + 1)
		c.Dst = decodeOps(r, c.DstSize, false)
	}
	if flags&2 != 0 {
		c.Change = decodeOps(r, maxSize, true)
	}
	c.Pick = r.u8()
	return c
}

func decodeOps(r *reader, size int64, change bool) []op {
	n := int(r.u8() % 12)
	var ops []op
	for range n {
		kind := r.u8()
		o := op{Kind: opKind(kind&7) % numOps}
		if o.Kind == opTrunc && !change {
			o.Kind = opData
		}
		aligned := kind&8 != 0 || o.Kind == opClone
		off := int64(r.u24())
		ln := int64(r.u16())
		o.From = int64(r.u8()) * 4096 % thirdSize
		o.Seed = uint64(kind)<<32 | uint64(off)<<8 | uint64(ln)
		switch {
		case aligned:
			off &^= 4095
			ln *= 4096
		case ln == 0xffff:
			ln = maxSize
		}
		if o.Kind == opTrunc {
			// The new size: shrink or grow around the current one.
			o.Off = off % (maxSize + 1)
			if aligned {
				o.Off &^= 4095
			}
			ops = append(ops, o)
			continue
		}
		if size == 0 {
			continue
		}
		o.Off = off % size
		if aligned {
			o.Off &^= 4095
		}
		o.Len = min(ln, size-o.Off)
		if o.Kind == opClone {
			// FICLONERANGE takes whole blocks, from inside the third file.
			o.Len = min(o.Len&^4095, thirdSize-o.From)
		}
		if o.Len <= 0 {
			continue
		}
		ops = append(ops, o)
	}
	return ops
}

// encode is decode's inverse for the seed corpus: it writes the bytes that
// decode to c (ops must already be in decode's range: offsets below the
// size, aligned ops aligned).
func encode(c fcase) []byte {
	var b []byte
	flags := c.Knobs << 4
	if c.HasDst {
		flags |= 1
	}
	if len(c.Change) > 0 {
		flags |= 2
	}
	b = append(b, flags)
	b = appendU24(b, uint32(c.Size))
	b = encodeOps(b, c.Src, c.Size)
	if c.HasDst {
		b = appendU24(b, uint32(c.DstSize))
		b = encodeOps(b, c.Dst, c.DstSize)
	}
	if len(c.Change) > 0 {
		b = encodeOps(b, c.Change, maxSize)
	}
	if c.Pick != 0 {
		b = append(b, c.Pick)
	}
	return b
}

func encodeOps(b []byte, ops []op, size int64) []byte {
	b = append(b, uint8(len(ops)))
	for _, o := range ops {
		aligned := o.Kind == opClone || (o.Off%4096 == 0 && o.Len%4096 == 0 && o.Len/4096 <= 0xffff)
		kind := uint8(o.Kind)
		ln := o.Len
		if o.Kind == opTrunc {
			ln = 0
			aligned = o.Off%4096 == 0
		}
		switch {
		case aligned:
			kind |= 8
			ln /= 4096
		case ln >= 0xffff:
			if o.Off+o.Len != size {
				panic(fmt.Sprintf("seed op %v: an unaligned length over 64 KiB must reach the end (%d)", o, size))
			}
			ln = 0xffff
		}
		b = append(b, kind)
		b = appendU24(b, uint32(o.Off))
		b = binary.BigEndian.AppendUint16(b, uint16(ln))
		b = append(b, uint8(o.From/4096))
	}
	return b
}

func appendU24(b []byte, v uint32) []byte {
	return append(b, byte(v>>16), byte(v>>8), byte(v))
}

// fill writes the deterministic pseudo-random content of a data op.
func fill(p []byte, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	for i := 0; i < len(p); i += 8 {
		v := rng.Uint64()
		for j := 0; j < 8 && i+j < len(p); j++ {
			p[i+j] = byte(v >> (8 * j))
		}
	}
	// A data op never writes an all-zero block by accident: that is opZero's job.
	if len(p) > 0 && p[0] == 0 {
		p[0] = 1
	}
}
