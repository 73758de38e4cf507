package qos

import (
	"errors"
	"testing"
)

func TestParseIOPriority(t *testing.T) {
	for _, c := range []struct {
		in   string
		want IOPriority
	}{
		{"", IOPriority{}},
		{"idle", IOPriority{Class: IOClassIdle}},
		{"best-effort", IOPriority{Class: IOClassBestEffort, Level: 4}},
		{"best-effort:0", IOPriority{Class: IOClassBestEffort, Level: 0}},
		{"best-effort:7", IOPriority{Class: IOClassBestEffort, Level: 7}},
	} {
		got, err := ParseIOPriority(c.in)
		if err != nil || got != c.want {
			t.Errorf("ParseIOPriority(%q) = %v, %v; want %v", c.in, got, err, c.want)
		}
	}
	for _, bad := range []string{"realtime", "idle:3", "best-effort:8", "best-effort:-1", "best-effort:", ":", "be:2", "IDLE"} {
		if _, err := ParseIOPriority(bad); !errors.Is(err, ErrBadIOPriority) {
			t.Errorf("ParseIOPriority(%q) = %v, want ErrBadIOPriority", bad, err)
		}
	}
}
