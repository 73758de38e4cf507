package sparse

import (
	"io/fs"
	"testing"
)

func TestTypeName(t *testing.T) {
	for _, tc := range []struct {
		mode fs.FileMode
		want string
	}{
		{0o644, "regular file"},
		{fs.ModeDir | 0o755, "directory"},
		{fs.ModeSymlink | 0o777, "symbolic link"},
		{fs.ModeNamedPipe | 0o644, "named pipe"},
		{fs.ModeSocket | 0o755, "socket"},
		{fs.ModeDevice | fs.ModeCharDevice | 0o666, "character device"},
		{fs.ModeDevice | 0o660, "block device"},
		{fs.ModeIrregular, "special file"},
	} {
		if got := TypeName(tc.mode); got != tc.want {
			t.Errorf("TypeName(%v) = %q, want %q", tc.mode, got, tc.want)
		}
	}
}
