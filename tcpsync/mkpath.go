package tcpsync

import (
	"errors"
	"io/fs"
	"strings"
)

// makeParents creates the missing directories of name beneath the root
// (mode 0755, like rsync --mkpath), one component at a time, never
// through a symlink: a fresh server root accepts a push to "vm1/disk.img".
// Existing components are left for checkDirs to judge.
func (s *Server) makeParents(name string) error {
	comps := strings.Split(name, "/")
	for i := 1; i < len(comps); i++ {
		dir := strings.Join(comps[:i], "/")
		fi, err := s.root.Lstat(dir)
		if err == nil {
			if !fi.IsDir() {
				return nil // a symlink or a file: checkDirs refuses it
			}
			continue
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return pathErr(sanitize(name), err)
		}
		if err := s.root.Mkdir(dir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			return pathErr(sanitize(name), err)
		}
	}
	return nil
}
