package fuzz

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

var writeSeeds = flag.Bool("fuzz.writeseeds", false, "rewrite the seed corpus under testdata/fuzz from seedCases")

const kib = 1 << 10

// seedCases are the geometries the seed corpus must cover: each one is
// where a planted bug on the data path once survived every other test.
func seedCases() map[string]fcase {
	d := func(off, n int64) op { return op{Kind: opData, Off: off, Len: n} }
	z := func(off, n int64) op { return op{Kind: opZero, Off: off, Len: n} }
	pre := func(off, n int64) op { return op{Kind: opPrealloc, Off: off, Len: n} }
	punch := func(off, n int64) op { return op{Kind: opPunch, Off: off, Len: n} }
	clone := func(off, n, from int64) op { return op{Kind: opClone, Off: off, Len: n, From: from} }
	trunc := func(n int64) op { return op{Kind: opTrunc, Off: n} }
	return map[string]fcase{
		"empty":      {},
		"first-byte": {Size: 1 << 20, Src: []op{d(0, 1)}},
		"last-byte":  {Size: 1<<20 + 1, Src: []op{d(1<<20, 1)}},
		// The short last block of a size that is not a block multiple
		// changes between syncs: a re-sync must compare it.
		"short-last-block": {Size: 3*4096 + 100, Src: []op{d(0, 3*4096+100)},
			HasDst: true, DstSize: 3*4096 + 100, Dst: []op{d(0, 3*4096+100)},
			Change: []op{d(3*4096+60, 40)}},
		"short-last-block-64k": {Size: 200*kib + 7, Src: []op{d(0, 200*kib+7)},
			Change: []op{d(200*kib, 7)}, Knobs: 1},
		// The same blocks at swapped offsets: a digest that does not bind
		// each block to its offset calls them equal.
		"swapped-blocks": {Size: 64 * kib, Src: []op{clone(0, 4*kib, 0), clone(4*kib, 4*kib, 4*kib)},
			HasDst: true, DstSize: 64 * kib, Dst: []op{clone(0, 4*kib, 4*kib), clone(4*kib, 4*kib, 0)}},
		// Small holes inside 64 KiB blocks of data over a destination full
		// of data: only exact punching leaves the source's holes.
		"holes-inside-64k-blocks": {Size: 256 * kib, Src: []op{d(0, 256*kib), punch(8*kib, 4*kib), punch(72*kib, 8*kib), punch(200*kib, 56*kib)},
			HasDst: true, DstSize: 256 * kib, Dst: []op{d(0, 256*kib)}, Knobs: 1},
		// Source and destination each share blocks with a third file, at
		// different places of it: shared, yet different.
		"both-shared-different": {Size: 256 * kib, Src: []op{clone(0, 64*kib, 0), clone(128*kib, 64*kib, 256*kib)},
			HasDst: true, DstSize: 256 * kib, Dst: []op{clone(0, 64*kib, 64*kib), clone(128*kib, 64*kib, 256*kib)}},
		// The same physical blocks of the third file at different logical
		// offsets on each side.
		"same-physical-other-offset": {Size: 256 * kib, Src: []op{clone(64*kib, 64*kib, 0)},
			HasDst: true, DstSize: 256 * kib, Dst: []op{clone(0, 64*kib, 0), clone(64*kib, 64*kib, 128*kib)}},
		// All-zero data and unwritten preallocations are not holes the
		// same way: zeros are data (unless detected), preallocations are
		// holes to SEEK_DATA.
		"zeros-and-prealloc": {Size: 512*kib + 3, Src: []op{z(0, 64*kib), d(64*kib, 10), pre(128*kib, 128*kib), d(300*kib, 5000), z(400*kib, 100)}},
		"prealloc-past-eof":  {Size: 100 * kib, Src: []op{d(0, 4*kib), pre(96*kib, 4*kib)}},
		// A destination's unwritten preallocation over a source hole:
		// no map shows it, yet it takes space until punched (found by
		// the fuzzer once it ran one option set per input).
		"dst-prealloc-over-hole": {Size: 1<<20 + 7, Src: []op{d(1000*kib, 12_336)},
			HasDst: true, DstSize: 1<<20 + 7, Dst: []op{d(1000*kib, 12_336), pre(36*kib, 900*kib)}},
		// The same under all-zero source data and a source hole: on tmpfs
		// (no FIEMAP) guessing where the preallocation is punched the
		// hole on every re-sync.
		"dst-prealloc-under-zeros": {Size: 1_126_447, Src: []op{z(228*kib, 892_975)},
			HasDst: true, DstSize: 1_060_911, Dst: []op{pre(1_036_242, 12_336)}},
		// Change scripts: punch, write into a hole, shrink then grow.
		"change-punch-write": {Size: 1 << 20, Src: []op{d(0, 1<<20)},
			Change: []op{punch(100*kib, 300*kib), d(600*kib, 1), z(700*kib, 4*kib)}},
		"change-shrink-grow": {Size: 1<<20 + 123, Src: []op{d(0, 200*kib), d(900*kib, 124*kib+123)},
			Change: []op{trunc(150*kib + 1), trunc(2 << 20), d(2<<20-10, 10)}},
		// Knob bit 1: tcpsync atomic; bit 2: a replica snapshot between the
		// layout and the change script (unmaps then discard nothing).
		"atomic-resync": {Size: 300*kib + 5, Src: []op{d(0, 100*kib), z(200*kib, 4*kib)},
			HasDst: true, DstSize: 100 * kib, Dst: []op{d(50*kib, 50*kib)},
			Change: []op{d(10, 10), punch(0, 64*kib)}, Knobs: 2},
		"snapshot-then-change": {Size: 512 * kib, Src: []op{d(0, 256*kib), clone(256*kib, 64*kib, 0)},
			Change: []op{punch(0, 128*kib), d(100*kib, 3), z(300*kib, 8*kib), d(500*kib, 12*kib)}, Knobs: 4},
		"bigger-destination": {Size: 100*kib + 1, Src: []op{d(4*kib, 8*kib)},
			HasDst: true, DstSize: 2<<20 - 1, Dst: []op{d(0, 2<<20-1)}},
		"unaligned-everything": {Size: 777_777, Src: []op{d(1, 4095), d(4097, 3), punch(10_000, 20_000), d(65_535, 2), z(70_001, 9999)},
			HasDst: true, DstSize: 333_333, Dst: []op{d(17, 60_000), punch(50_000, 8192)},
			Change: []op{d(777_000, 777), punch(0, 8192), trunc(777_777 - 1)}},
	}
}

// TestSeedCorpus checks the committed corpus is what seedCases says (run
// with -fuzz.writeseeds to rewrite it) and that every seed decodes back to
// its case.
func TestSeedCorpus(t *testing.T) {
	for name, c := range seedCases() {
		b := encode(c)
		got := decode(b)
		// decode derives the data ops' seeds; compare the rest.
		for _, ops := range [][]op{got.Src, got.Dst, got.Change} {
			for i := range ops {
				ops[i].Seed = 0
			}
		}
		if !reflect.DeepEqual(norm(got), norm(c)) {
			t.Errorf("seed %s: decode(encode) = %v, want %v", name, got, c)
		}
		body := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", b)
		for _, target := range []string{"FuzzLocal", "FuzzTCP", "FuzzReplica"} {
			p := filepath.Join("testdata", "fuzz", target, "seed-"+name)
			if *writeSeeds {
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
					t.Fatal(err)
				}
				continue
			}
			old, err := os.ReadFile(p)
			if err != nil || string(old) != body {
				t.Errorf("%s is missing or stale: go test ./fuzz -run TestSeedCorpus -fuzz.writeseeds", p)
			}
		}
	}
}

// norm makes empty and nil op lists compare equal.
func norm(c fcase) fcase {
	for _, p := range []*[]op{&c.Src, &c.Dst, &c.Change} {
		if len(*p) == 0 {
			*p = nil
		}
	}
	return c
}
