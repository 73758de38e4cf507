//go:build !linux

package sparse

import (
	"errors"
	"io/fs"
	"os"
)

// Without SEEK_DATA the walker reports the whole file as data
// (HolesKnown is false) and callers fall back to zero detection.
var errNoMoreData = errors.New("sparse: no more data")

func seekData(int, int64) (int64, error) { return 0, errors.ErrUnsupported }
func seekHole(int, int64) (int64, error) { return 0, errors.ErrUnsupported }

func isSeekUnsupported(err error) bool { return errors.Is(err, errors.ErrUnsupported) }

// Stat returns what the package needs to know about f. Block devices are not
// supported on this platform, and Dev and Ino are left zero.
func Stat(f *os.File) (FileInfo, error) {
	st, err := f.Stat()
	if err != nil {
		return FileInfo{}, err
	}
	info := FileInfo{Size: st.Size(), Allocated: st.Size(), Mode: st.Mode(), ModTime: st.ModTime(), ChangeTime: st.ModTime()}
	if st.Mode()&fs.ModeDevice != 0 && st.Mode()&fs.ModeCharDevice == 0 {
		return FileInfo{}, &fs.PathError{Op: "stat", Path: f.Name(), Err: errors.ErrUnsupported}
	}
	return info, nil
}
