package bytesize

import (
	"math"
	"testing"
)

func TestFormat(t *testing.T) {
	for _, c := range []struct {
		n    int64
		want string
	}{
		{0, "0 B"},
		{-5, "-5 B"},
		{1023, "1023 B"},
		{1024, "1.0 KiB"},
		{1536, "1.5 KiB"},
		{1<<20 - 1, "1024.0 KiB"},
		{8 << 20, "8.0 MiB"},
		{3 << 30, "3.0 GiB"},
		{5 << 40, "5.0 TiB"},
		{7 << 50, "7.0 PiB"},
		{1 << 60, "1.0 EiB"},
		{math.MaxInt64, "8.0 EiB"},
	} {
		if got := Format(c.n); got != c.want {
			t.Errorf("Format(%d) = %q, want %q", c.n, got, c.want)
		}
	}
}

func TestParse(t *testing.T) {
	for in, want := range map[string]int64{"0": 0, "512": 512, "4K": 4096, "4KiB": 4096, "4ki": 4096, " 4k ": 4096, "10M": 10 << 20, "2g": 2 << 30, "1T": 1 << 40, "3GB": 3e9, "1.5G": 3 << 29, "100MiB": 100 << 20, "1kb": 1000, "7B": 7} {
		got, err := Parse(in)
		if err != nil || got != want {
			t.Errorf("Parse(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "-1", "K", "1X", "99999999999T", "1P", "1e6", "0x10", "1_000", "1.2.3M", ".5K", "5.K", "NaN", "0.1"} {
		if n, err := Parse(in); err == nil {
			t.Errorf("Parse(%q) = %d, want an error", in, n)
		}
	}
}
