package bench

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// cpuProfile is the part of a pprof profile (profile.proto, as
// runtime/pprof writes it) that a summary needs: the sample types, each
// sample's stack and values, and the function names of every location.
// It is read here rather than with github.com/google/pprof/profile, whose
// package initialisation (regular expressions compiled at start) every run
// of the command paid for, whether it summarised a profile or not.
type cpuProfile struct {
	sampleTypes []valueType
	samples     []cpuSample
	// funcs are the function ids of each location id, leaf (innermost
	// inlined frame) first.
	funcs map[uint64][]uint64
	names map[uint64]string // function id to name
}

type valueType struct{ typ, unit string }

type cpuSample struct {
	locations []uint64 // leaf first
	values    []int64
}

// errProfile: the file is not a well-formed pprof profile.
var errProfile = errors.New("bench: malformed pprof profile")

// maxProfile caps a profile's decompressed size (a bench run's CPU
// profile is well under a megabyte).
const maxProfile = 1 << 30

// parseCPUProfile reads a pprof profile, gzip-compressed or not.
func parseCPUProfile(r io.Reader) (*cpuProfile, error) {
	br := bufio.NewReader(r)
	if magic, err := br.Peek(2); err == nil && magic[0] == 0x1f && magic[1] == 0x8b {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", errProfile, err)
		}
		r = zr
	} else {
		r = br
	}
	b, err := io.ReadAll(io.LimitReader(r, maxProfile+1))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errProfile, err)
	}
	if len(b) > maxProfile {
		return nil, fmt.Errorf("%w: larger than %d bytes", errProfile, maxProfile)
	}
	return decodeProfile(b)
}

// rawValueType is a ValueType before its string indexes are resolved.
type rawValueType struct{ typ, unit int64 }

// decodeProfile decodes the Profile message: sample_type (1), sample (2),
// location (4), function (5) and string_table (6); other fields are
// skipped.
func decodeProfile(b []byte) (*cpuProfile, error) {
	p := &cpuProfile{funcs: map[uint64][]uint64{}, names: map[uint64]string{}}
	var types []rawValueType
	funcNames := map[uint64]int64{}
	var strs []string
	err := fields(b, func(num int, wire byte, v uint64, sub []byte) error {
		if wire != wireBytes {
			return nil
		}
		switch num {
		case 1:
			var vt rawValueType
			err := fields(sub, func(num int, wire byte, v uint64, _ []byte) error {
				if wire == wireVarint && num == 1 {
					vt.typ = int64(v)
				} else if wire == wireVarint && num == 2 {
					vt.unit = int64(v)
				}
				return nil
			})
			types = append(types, vt)
			return err
		case 2:
			var s cpuSample
			err := fields(sub, func(num int, wire byte, v uint64, sub []byte) error {
				switch num {
				case 1:
					return repeated(wire, v, sub, func(x uint64) { s.locations = append(s.locations, x) })
				case 2:
					return repeated(wire, v, sub, func(x uint64) { s.values = append(s.values, int64(x)) })
				}
				return nil
			})
			p.samples = append(p.samples, s)
			return err
		case 4:
			var id uint64
			var fns []uint64
			err := fields(sub, func(num int, wire byte, v uint64, sub []byte) error {
				switch {
				case num == 1 && wire == wireVarint:
					id = v
				case num == 4 && wire == wireBytes:
					return fields(sub, func(num int, wire byte, v uint64, _ []byte) error {
						if num == 1 && wire == wireVarint {
							fns = append(fns, v)
						}
						return nil
					})
				}
				return nil
			})
			p.funcs[id] = fns
			return err
		case 5:
			var id uint64
			var name int64
			err := fields(sub, func(num int, wire byte, v uint64, _ []byte) error {
				if num == 1 && wire == wireVarint {
					id = v
				} else if num == 2 && wire == wireVarint {
					name = int64(v)
				}
				return nil
			})
			funcNames[id] = name
			return err
		case 6:
			strs = append(strs, string(sub))
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	str := func(i int64) (string, error) {
		if i < 0 || i >= int64(len(strs)) {
			return "", fmt.Errorf("%w: string index %d of %d", errProfile, i, len(strs))
		}
		return strs[i], nil
	}
	for _, vt := range types {
		typ, err := str(vt.typ)
		if err != nil {
			return nil, err
		}
		unit, err := str(vt.unit)
		if err != nil {
			return nil, err
		}
		p.sampleTypes = append(p.sampleTypes, valueType{typ, unit})
	}
	for id, i := range funcNames {
		name, err := str(i)
		if err != nil {
			return nil, err
		}
		p.names[id] = name
	}
	for _, s := range p.samples {
		if len(s.values) != len(p.sampleTypes) {
			return nil, fmt.Errorf("%w: a sample has %d values for %d types", errProfile, len(s.values), len(p.sampleTypes))
		}
	}
	return p, nil
}

// Protocol buffer wire types.
const (
	wireVarint  = 0
	wireFixed64 = 1
	wireBytes   = 2
	wireFixed32 = 5
)

// fields calls fn for each field of the message b: its number, wire type,
// value (varint and fixed types) or contents (length-delimited).
func fields(b []byte, fn func(num int, wire byte, v uint64, sub []byte) error) error {
	for len(b) > 0 {
		key, n := binary.Uvarint(b)
		if n <= 0 {
			return fmt.Errorf("%w: bad field key", errProfile)
		}
		b = b[n:]
		num, wire := int(key>>3), byte(key&7)
		var v uint64
		var sub []byte
		switch wire {
		case wireVarint:
			if v, n = binary.Uvarint(b); n <= 0 {
				return fmt.Errorf("%w: bad varint in field %d", errProfile, num)
			}
			b = b[n:]
		case wireFixed64:
			if len(b) < 8 {
				return fmt.Errorf("%w: short field %d", errProfile, num)
			}
			v, b = binary.LittleEndian.Uint64(b), b[8:]
		case wireFixed32:
			if len(b) < 4 {
				return fmt.Errorf("%w: short field %d", errProfile, num)
			}
			v, b = uint64(binary.LittleEndian.Uint32(b)), b[4:]
		case wireBytes:
			l, n := binary.Uvarint(b)
			if n <= 0 || l > uint64(len(b)-n) {
				return fmt.Errorf("%w: bad length in field %d", errProfile, num)
			}
			sub, b = b[n:n+int(l)], b[n+int(l):]
		default:
			return fmt.Errorf("%w: wire type %d in field %d", errProfile, wire, num)
		}
		if err := fn(num, wire, v, sub); err != nil {
			return err
		}
	}
	return nil
}

// repeated decodes a repeated integer field, packed (one length-delimited
// run of varints) or not (one varint per field).
func repeated(wire byte, v uint64, sub []byte, add func(uint64)) error {
	switch wire {
	case wireVarint:
		add(v)
	case wireBytes:
		r := bytes.NewReader(sub)
		for r.Len() > 0 {
			x, err := binary.ReadUvarint(r)
			if err != nil {
				return fmt.Errorf("%w: bad packed varint", errProfile)
			}
			add(x)
		}
	}
	return nil
}
