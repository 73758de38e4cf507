package qos

import (
	"errors"
	"testing"
)

func TestParseRate(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int64
	}{
		{"0", 0}, {"4096", 4096}, {"100B", 100}, {"500K", 500 << 10}, {"500k", 500 << 10},
		{"1.5M", 3 << 19}, {"100MiB", 100 << 20}, {"100M/s", 100 << 20}, {"2G", 2 << 30}, {"1T", 1 << 40},
		{"1KB", 1000}, {"10MB", 10e6}, {"1GB", 1e9}, {" 50M ", 50 << 20},
	} {
		got, err := ParseRate(c.in)
		if err != nil || got != c.want {
			t.Errorf("ParseRate(%q) = %d, %v; want %d", c.in, got, err, c.want)
		}
	}
	for _, bad := range []string{"", "M", "-1", "-5M", "1e6", "0x10", "ten", "5X", "1.2.3M", "NaN", "Inf", "0.0001", "9999999T", "1_000"} {
		if n, err := ParseRate(bad); !errors.Is(err, ErrBadRate) {
			t.Errorf("ParseRate(%q) = %d, %v; want ErrBadRate", bad, n, err)
		}
	}
}
