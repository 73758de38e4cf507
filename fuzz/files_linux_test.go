package fuzz

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// makeThird writes the file that layouts clone ranges from.
func makeThird(t testing.TB, dir string) string {
	t.Helper()
	p := filepath.Join(dir, "third")
	buf := make([]byte, thirdSize)
	fill(buf, 0x7417d)
	if err := os.WriteFile(p, buf, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// build creates path with the given size and applies ops to it.
func build(t testing.TB, path string, size int64, ops []op, third string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
	apply(t, f, ops, third)
}

// change applies a change script to an existing file.
func change(t testing.TB, path string, ops []op, third string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	apply(t, f, ops, third)
}

// apply runs ops on f with plain syscalls: this is how a user or a guest
// makes such a file, not through any code under test. Ops that reach past
// the current size (after a truncate in a change script) are cut to it.
func apply(t testing.TB, f *os.File, ops []op, third string) {
	t.Helper()
	tf, err := os.Open(third)
	if err != nil {
		t.Fatal(err)
	}
	defer tf.Close()
	for _, o := range ops {
		if err := applyOne(f, tf, o); err != nil {
			t.Fatalf("%s: %v: %v", f.Name(), o, err)
		}
	}
}

func applyOne(f, third *os.File, o op) error {
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	size := fi.Size()
	if o.Kind == opTrunc {
		return f.Truncate(o.Off)
	}
	if o.Off >= size {
		return nil
	}
	n := min(o.Len, size-o.Off)
	fd := int(f.Fd())
	switch o.Kind {
	case opData, opZero:
		buf := make([]byte, n)
		if o.Kind == opData {
			fill(buf, o.Seed)
		}
		_, err = f.WriteAt(buf, o.Off)
		return err
	case opPrealloc:
		err = unix.Fallocate(fd, unix.FALLOC_FL_KEEP_SIZE, o.Off, n)
		if errors.Is(err, unix.EOPNOTSUPP) {
			return nil
		}
		return err
	case opPunch:
		err = unix.Fallocate(fd, unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, o.Off, n)
		if errors.Is(err, unix.EOPNOTSUPP) {
			buf := make([]byte, n)
			_, err = f.WriteAt(buf, o.Off)
		}
		return err
	case opClone:
		n &^= 4095
		if n == 0 {
			return nil
		}
		err = unix.IoctlFileCloneRange(fd, &unix.FileCloneRange{
			Src_fd: int64(third.Fd()), Src_offset: uint64(o.From), Src_length: uint64(n), Dest_offset: uint64(o.Off),
		})
		if err == nil {
			return nil
		}
		if !errors.Is(err, unix.EOPNOTSUPP) && !errors.Is(err, unix.EXDEV) && !errors.Is(err, unix.EINVAL) &&
			!errors.Is(err, unix.ENOTTY) && !errors.Is(err, unix.ENOSYS) {
			return fmt.Errorf("FICLONERANGE: %w", err)
		}
		// No reflink here: the same bytes, copied.
		buf := make([]byte, n)
		if _, err := third.ReadAt(buf, o.From); err != nil {
			return err
		}
		_, err = f.WriteAt(buf, o.Off)
		return err
	}
	return fmt.Errorf("unknown op %d", o.Kind)
}
