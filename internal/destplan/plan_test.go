package destplan

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"

	"github.com/sparsesync/sparsesync/sparse"
)

// TestDataDriven runs the cases in testdata/*.txt:
//
//	plan unit=N [device]
//	src SIZE: [a,b) ...     the source's data
//	dst SIZE: [a,b) ...     the destination's data as walked
//	hidden SIZE: [a,b) ...  (optional) the destination's hidden allocation
//	keep SIZE: [a,b) ...    (optional) the source's hidden allocation
//
// Sizes and offsets are bytes, or KiB with a k suffix. The output is the
// plan; every case is also applied to a model of the destination (oracle),
// which must end up equal to the source in bytes and hold nothing where the
// source has a hole.
func TestDataDriven(t *testing.T) {
	files, _ := filepath.Glob("testdata/*.txt")
	if len(files) == 0 {
		t.Fatal("no data-driven files")
	}
	for _, f := range files {
		datadriven.RunTest(t, f, func(t *testing.T, d *datadriven.TestData) string {
			if d.Cmd != "plan" {
				t.Fatalf("%s: unknown command %q", d.Pos, d.Cmd)
			}
			in := parseInput(t, d)
			p, err := Make(in)
			if err != nil {
				return "error: " + err.Error() + "\n"
			}
			if err := oracle(in, p); err != nil {
				t.Fatalf("%s: %v", d.Pos, err)
			}
			return render(in, p)
		})
	}
}

func parseInput(t *testing.T, d *datadriven.TestData) Input {
	t.Helper()
	var in Input
	d.ScanArgs(t, "unit", &in.Unit)
	in.DstHolesUnknown = d.HasArg("device")
	seen := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(d.Input), "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), " ")
		if !ok {
			t.Fatalf("%s: line %q: want NAME SIZE: [a,b) ...", d.Pos, line)
		}
		m, err := parseMap(rest)
		if err != nil {
			t.Fatalf("%s: %s: %v", d.Pos, name, err)
		}
		switch name {
		case "src":
			in.Src = m
		case "dst":
			in.Dst = m
		case "hidden":
			in.Hidden = m
		case "keep":
			in.Keep = m
		default:
			t.Fatalf("%s: unknown map %q", d.Pos, name)
		}
		seen[name] = true
	}
	if !seen["src"] || !seen["dst"] {
		t.Fatalf("%s: src and dst are required", d.Pos)
	}
	return in
}

// parseMap reads "SIZE: [a,b) [c,d)".
func parseMap(s string) (sparse.Map, error) {
	size, ext, ok := strings.Cut(s, ":")
	if !ok {
		return sparse.Map{}, fmt.Errorf("%q: no size", s)
	}
	n, err := parseNum(strings.TrimSpace(size))
	if err != nil {
		return sparse.Map{}, err
	}
	var xs []sparse.Extent
	for _, f := range strings.Fields(ext) {
		a, b, ok := strings.Cut(strings.TrimSuffix(strings.TrimPrefix(f, "["), ")"), ",")
		if !ok {
			return sparse.Map{}, fmt.Errorf("%q: want [a,b)", f)
		}
		lo, err := parseNum(a)
		if err != nil {
			return sparse.Map{}, err
		}
		hi, err := parseNum(b)
		if err != nil {
			return sparse.Map{}, err
		}
		xs = append(xs, sparse.Extent{Off: lo, Len: hi - lo})
	}
	return sparse.NewMap(n, xs...)
}

func parseNum(s string) (int64, error) {
	mul := int64(1)
	if t, ok := strings.CutSuffix(s, "k"); ok {
		s, mul = t, 1024
	}
	n, err := strconv.ParseInt(s, 10, 64)
	return n * mul, err
}

func num(n int64) string {
	if n != 0 && n%1024 == 0 {
		return fmt.Sprintf("%dk", n/1024)
	}
	return strconv.FormatInt(n, 10)
}

func ranges(m sparse.Map) string {
	if m.Len() == 0 {
		return "-"
	}
	var b strings.Builder
	for i, e := range m.Extents() {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "[%s,%s)", num(e.Off), num(e.End()))
	}
	return b.String()
}

func render(in Input, p Plan) string {
	var b strings.Builder
	if p.Resize {
		fmt.Fprintf(&b, "resize %s -> %s\n", num(in.Dst.Size()), num(p.Size))
	} else {
		fmt.Fprintf(&b, "size %s\n", num(p.Size))
	}
	for _, r := range []struct {
		name string
		m    sparse.Map
	}{{"data", p.Data}, {"compare", p.Compare}, {"copy", p.Copy()}, {"punch", p.Punch}, {"held", p.Held}} {
		fmt.Fprintf(&b, "%-8s%s\n", r.name, ranges(r.m))
	}
	return b.String()
}

// oracle applies p to a byte model of the destination, as the callers do,
// and checks the result: every byte equal to the source's, nothing held
// where the source has a hole (but where Keep keeps hidden allocation), and
// every map the source's size. The model is the worst case the plan must
// survive: a grown destination holds its whole old last page (btrfs), and
// the old data differs from the source's everywhere.
func oracle(in Input, p Plan) error {
	s, d := in.Src.Size(), in.Dst.Size()
	for _, m := range []sparse.Map{p.Data, p.Compare, p.Copy(), p.Punch, p.Held} {
		if m.Size() != s {
			return fmt.Errorf("a map of size %d in a plan of size %d", m.Size(), s)
		}
	}
	if s > 1<<20 || d > 1<<20 {
		return nil // too big to model byte by byte
	}
	inSrc := bits(in.Src)
	srcAt := func(i int64) byte {
		if inSrc[i] {
			return byte(i%251 + 1)
		}
		return 0
	}
	// The destination before: its data differs from the source's, its
	// hidden allocation reads as zeros.
	val, held := make([]byte, max(s, d)), make([]bool, max(s, d))
	for i := range d {
		switch {
		case in.DstHolesUnknown || in.Dst.Contains(i):
			val[i], held[i] = byte(i%13+100), true
		case in.Hidden.Contains(i):
			held[i] = true
		}
	}
	// Resize.
	if p.Resize != (d != s) {
		return fmt.Errorf("resize %v for sizes %d -> %d", p.Resize, d, s)
	}
	if d < s && d%growPage != 0 {
		for i := d - d%growPage; i < min(s, d-d%growPage+growPage); i++ {
			held[i] = true
		}
	}
	val, held = val[:s], held[:s]
	// Punch, then copy, then compare and write the source's data where a
	// unit differs.
	for _, e := range p.Punch.Extents() {
		for i := e.Off; i < e.End(); i++ {
			val[i], held[i] = 0, false
		}
	}
	for _, e := range p.Copy().Extents() {
		for i := e.Off; i < e.End(); i++ {
			val[i], held[i] = srcAt(i), true
		}
	}
	for _, e := range p.Compare.Extents() {
		for u := e.Off; u < e.End(); u = min(e.End(), u-u%in.Unit+in.Unit) {
			end := min(e.End(), u-u%in.Unit+in.Unit)
			differ := false
			for i := u; i < end; i++ {
				differ = differ || val[i] != srcAt(i)
			}
			for i := u; differ && i < end; i++ {
				if inSrc[i] {
					val[i], held[i] = srcAt(i), true
				}
			}
		}
	}
	keep, hidden, dst := bits(in.Keep), bits(in.Hidden), bits(in.Dst)
	for i := range s {
		if val[i] != srcAt(i) {
			return fmt.Errorf("byte %d is %d, the source's %d", i, val[i], srcAt(i))
		}
		kept := at(keep, i) && at(hidden, i) && !at(dst, i)
		if held[i] && !inSrc[i] && !kept {
			return fmt.Errorf("byte %d is held where the source has a hole", i)
		}
	}
	return nil
}

// bits is m as one bool per byte.
func bits(m sparse.Map) []bool {
	b := make([]bool, m.Size())
	for _, e := range m.Extents() {
		for i := e.Off; i < e.End(); i++ {
			b[i] = true
		}
	}
	return b
}

func at(b []bool, i int64) bool { return i < int64(len(b)) && b[i] }

// TestRandomPlans runs the oracle on random small maps, and checks that
// hidden allocation changes only what is punched (a tcpsync sender, which
// does not know it, plans the same copy and compare as its receiver).
func TestRandomPlans(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	randMap := func(size int64) sparse.Map {
		var xs []sparse.Extent
		for range r.IntN(5) {
			off := r.Int64N(size + 1)
			xs = append(xs, sparse.Extent{Off: off, Len: r.Int64N(size - off + 1)})
		}
		m, err := sparse.NewMap(size, xs...)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	sizes := []int64{0, 1, 4095, 4096, 4097, 8192, 9000, 16384, 20000}
	for i := range 5000 {
		s, d := sizes[r.IntN(len(sizes))], sizes[r.IntN(len(sizes))]
		in := Input{Src: randMap(s), Dst: randMap(d), Hidden: randMap(d), Keep: randMap(s),
			Unit: []int64{1, 512, 4096, 8192}[r.IntN(4)], DstHolesUnknown: r.IntN(8) == 0}
		in.Hidden = in.Hidden.Difference(in.Dst)
		p, err := Make(in)
		if err != nil {
			t.Fatal(err)
		}
		if err := oracle(in, p); err != nil {
			t.Fatalf("case %d: %v\nsrc %v\ndst %v (holes unknown %v)\nhidden %v\nkeep %v\nunit %d\n%s",
				i, err, in.Src, in.Dst, in.DstHolesUnknown, in.Hidden, in.Keep, in.Unit, render(in, p))
		}
		bare, err := Make(Input{Src: in.Src, Dst: in.Dst, DstHolesUnknown: in.DstHolesUnknown, Unit: in.Unit})
		if err != nil {
			t.Fatal(err)
		}
		if !bare.Data.Equal(p.Data) || !bare.Compare.Equal(p.Compare) || !bare.Copy().Equal(p.Copy()) {
			t.Fatalf("case %d: hidden allocation changed the copy or the compare:\n%s\n%s", i, render(in, p), render(in, bare))
		}
	}
}

func TestBadUnit(t *testing.T) {
	for _, u := range []int64{0, -4096, 3, 4095} {
		if _, err := Make(Input{Unit: u}); !errors.Is(err, ErrInvalidInput) {
			t.Errorf("unit %d: %v, want ErrInvalidInput", u, err)
		}
	}
}
