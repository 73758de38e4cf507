package sparse

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
)

// DiffFiles compares the files at paths a and b: their sizes, and when
// those are equal their bytes over the union of both data maps
// (FirstDiff, with pace). It returns both sizes and the offset of the first
// differing byte, -1 when the bytes are the same or were not compared.
func DiffFiles(ctx context.Context, a, b string, pace func(n int64) (int64, error)) (sizeA, sizeB, off int64, err error) {
	ma, _, err := ReadMap(ctx, a)
	if err != nil {
		return 0, 0, -1, err
	}
	mb, _, err := ReadMap(ctx, b)
	if err != nil {
		return 0, 0, -1, err
	}
	sizeA, sizeB = ma.Size(), mb.Size()
	if sizeA != sizeB {
		return sizeA, sizeB, -1, nil
	}
	fa, err := os.Open(a)
	if err != nil {
		return sizeA, sizeB, -1, err
	}
	defer fa.Close()
	fb, err := os.Open(b)
	if err != nil {
		return sizeA, sizeB, -1, err
	}
	defer fb.Close()
	off, err = FirstDiff(ctx, fa, fb, ma.Union(mb), pace)
	return sizeA, sizeB, off, err
}

// FirstDiff compares a and b byte for byte over the extents of m (the
// union of both files' data maps: outside it both read as zeros, unread)
// and returns the offset of the first byte where they differ, or -1 when
// they read the same. It reads at most 1 MiB of each at a time; pace, when
// not nil, is called before each chunk with its length and returns the
// length to read (at most that), after waiting for it if it must (a rate
// limit). ctx is checked once per chunk.
func FirstDiff(ctx context.Context, a, b io.ReaderAt, m Map, pace func(n int64) (int64, error)) (int64, error) {
	ba, bb := make([]byte, 1<<20), make([]byte, 1<<20)
	for _, e := range m.Extents() {
		for off := e.Off; off < e.End(); {
			if err := ctx.Err(); err != nil {
				return -1, err
			}
			n := min(int64(len(ba)), e.End()-off)
			if pace != nil {
				p, err := pace(n)
				if err != nil {
					return -1, err
				}
				n = max(min(p, n), 1)
			}
			if _, err := a.ReadAt(ba[:n], off); err != nil && !errors.Is(err, io.EOF) {
				return -1, err
			}
			if _, err := b.ReadAt(bb[:n], off); err != nil && !errors.Is(err, io.EOF) {
				return -1, err
			}
			if !bytes.Equal(ba[:n], bb[:n]) {
				for i := range n {
					if ba[i] != bb[i] {
						return off + i, nil
					}
				}
			}
			off += n
		}
	}
	return -1, nil
}
