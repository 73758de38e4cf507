package rawfd_test

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/sparsesync/sparsesync/internal/rawfd"
)

// TestDoClosed: a closed file's descriptor is never handed out, and the
// caller gets the error that says so.
func TestDoClosed(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "f"))
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	ran := false
	err = rawfd.Do(f, func(int) error { ran = true; return nil })
	if ran || err == nil {
		t.Fatalf("Do on a closed file: ran %v, err %v; want not run, an error", ran, err)
	}
	err = rawfd.Do2(os.Stdin, f, func(int, int) error { ran = true; return nil })
	if ran || err == nil {
		t.Fatalf("Do2 with a closed file: ran %v, err %v; want not run, an error", ran, err)
	}
}

// TestDo2Order: fn gets a's descriptor first and b's second, and its error
// comes back as it is.
func TestDo2Order(t *testing.T) {
	dir := t.TempDir()
	a, err := os.Create(filepath.Join(dir, "a"))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := os.Create(filepath.Join(dir, "b"))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	want := errors.New("from fn")
	err = rawfd.Do2(a, b, func(afd, bfd int) error {
		if _, err := syscall.Write(afd, []byte("aa")); err != nil {
			return err
		}
		if _, err := syscall.Write(bfd, []byte("b")); err != nil {
			return err
		}
		return want
	})
	if err != want {
		t.Fatalf("Do2 returned %v, want fn's error", err)
	}
	for name, n := range map[string]int64{"a": 2, "b": 1} {
		st, err := os.Stat(filepath.Join(dir, name))
		if err != nil || st.Size() != n {
			t.Fatalf("%s: size %v (%v), want %d", name, st.Size(), err, n)
		}
	}
}

// TestRetry: EINTR is retried, anything else (nil included) returned.
func TestRetry(t *testing.T) {
	calls := 0
	err := rawfd.Retry(func() error {
		calls++
		if calls < 3 {
			return syscall.EINTR
		}
		return syscall.EIO
	})
	if err != syscall.EIO || calls != 3 {
		t.Fatalf("Retry: %v after %d calls, want EIO after 3", err, calls)
	}
}
