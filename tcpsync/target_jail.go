package tcpsync

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	wtarget "github.com/sparsesync/sparsesync/internal/target"
)

// The jail's rules for the files a receiver writes next to a target:
//
//   - a target, temporary or sidecar name whose inode has more than one
//     link is refused (singleLink), as rsync's daemon refuses: a hard link
//     inside the root may name a file outside it;
//   - temporary files (the atomic copy, the sidecar's replacement) are
//     created with O_EXCL|O_NOFOLLOW under a name with 64 random bits, so a
//     link planted at a predictable name is never opened;
//   - temporary files left by killed sessions for the same target are
//     removed by the next session that holds the target's lock
//     (removeStale), whether or not it is atomic.

// singleLink refuses f when its inode has more than one name.
func singleLink(f *os.File, display string) error {
	st, err := f.Stat()
	if err != nil {
		return fmt.Errorf("%s: %w", display, err)
	}
	if sys, ok := st.Sys().(*syscall.Stat_t); ok && sys.Nlink > 1 {
		return fmt.Errorf("%w: %s has %d hard links", ErrPathOutsideRoot, display, sys.Nlink)
	}
	return nil
}

// randomName returns 16 hex digits from the system's CSPRNG.
func randomName() string {
	var b [8]byte
	_, _ = io.ReadFull(rand.Reader, b[:])
	return hex.EncodeToString(b[:])
}

// createExcl creates a fresh file named name(random) next to the target
// with O_EXCL, and locks it; it retries on a name collision.
func (t *target) createExcl(name func(string) string, perm fs.FileMode) (*os.File, string, error) {
	for i := 0; ; i++ {
		tmp := name(randomName())
		f, err := wtarget.OpenNoFollow(t.root, tmp, os.O_RDWR|os.O_CREATE|os.O_EXCL, perm)
		if errors.Is(err, fs.ErrExist) && i < 16 {
			continue
		}
		if err != nil {
			return nil, "", err
		}
		// Lock it before anyone can take it for a stale leftover, then
		// check that the name still is this file (a cleaner may have
		// removed it between the create and the lock).
		if flock(f) != nil || !t.sameFile(tmp, f) {
			t.removeIfSame(tmp, f)
			f.Close()
			if i < 16 {
				continue
			}
			return nil, "", fmt.Errorf("%s: temporary file %s vanished", t.display, tmp)
		}
		return f, tmp, nil
	}
}

// tempName is the atomic temporary file's name for a random r: hidden, and
// ending in the reserved suffix (ValidateName refuses it as a remote name).
func (t *target) tempName(r string) string {
	return path.Join(path.Dir(t.rel), "."+path.Base(t.rel)+"."+r+tmpSuffix)
}

// createTemp makes the atomic temporary file: created exclusively and
// locked here (tmpLock), then handed by name to internal/target, whose
// descriptor must be the same file.
func (t *target) createTemp() error {
	lf, tmp, err := t.createExcl(t.tempName, 0o600)
	if err != nil {
		return pathErr(t.display, err)
	}
	w, err := wtarget.Create(t.rel, &wtarget.Options{Root: t.root, Atomic: true, TempName: tmp, Mode: 0o644})
	if err == nil && !sameInode(lf, w.OS()) {
		w.Close()
		err = fmt.Errorf("temporary file %s replaced while opened", tmp)
	}
	if err != nil {
		t.removeIfSame(tmp, lf)
		lf.Close()
		return pathErr(t.display, err)
	}
	t.w, t.tmpLock = w, lf
	return nil
}

// sameFile reports whether name (not followed) is the file f.
func (t *target) sameFile(name string, f *os.File) bool {
	li, err := t.root.Lstat(name)
	if err != nil {
		return false
	}
	fi, err := f.Stat()
	return err == nil && os.SameFile(li, fi)
}

func sameInode(a, b *os.File) bool {
	ai, err1 := a.Stat()
	bi, err2 := b.Stat()
	return err1 == nil && err2 == nil && os.SameFile(ai, bi)
}

// removeIfSame unlinks name if it still is the file f.
func (t *target) removeIfSame(name string, f *os.File) {
	if t.sameFile(name, f) {
		_ = t.root.Remove(name)
	}
}

// staleName reports whether base (a directory entry next to the target) is
// a temporary file tcpsync makes for it: ".NAME.<16 hex>.tcpsync-tmp",
// "NAME.<16 hex>.tcpsync.new", or the fixed names of older versions.
func (t *target) staleName(base string) bool {
	name := path.Base(t.rel)
	for _, p := range [][2]string{{"." + name + ".", tmpSuffix}, {name + ".", sidecarSuffix + ".new"}} {
		mid, ok := strings.CutPrefix(base, p[0])
		if !ok {
			continue
		}
		if mid, ok = strings.CutSuffix(mid, p[1]); ok && len(mid) == 16 && isHex(mid) {
			return true
		}
	}
	return base == "."+name+tmpSuffix || base == name+sidecarSuffix+".new"
}

func isHex(s string) bool {
	for _, c := range s {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// removeStale removes the temporary files of killed sessions for this
// target: regular files no live session holds locked (a live session locks
// its temporary file before using it). Symlinks and other special files of
// those names are left alone; nothing is ever opened through a link. Best
// effort: the session goes on whatever happens here.
func (t *target) removeStale() {
	dir := path.Dir(t.rel)
	d, err := t.root.Open(dir)
	if err != nil {
		return
	}
	defer d.Close()
	for {
		names, err := d.Readdirnames(1024)
		for _, n := range names {
			name := path.Join(dir, n)
			if !t.staleName(n) || (t.tmpLock != nil && name == t.w.TempName()) {
				continue
			}
			f, err := wtarget.OpenNoFollow(t.root, name, os.O_RDONLY|unix.O_NONBLOCK, 0)
			if err != nil {
				continue
			}
			if st, err := f.Stat(); err == nil && st.Mode().IsRegular() && flock(f) == nil {
				t.removeIfSame(name, f)
			}
			f.Close()
		}
		if err != nil {
			return
		}
	}
}
