package replica

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/sparsesync/sparsesync/internal/target"
)

// File names inside a replica directory. The first group is Longhorn's
// layout; HeaderFile and LiveCounterFile are ours, and Longhorn ignores them
// (it only loads volume.meta, *.meta, *.img and revision.counter).
const (
	VolumeMetaFile      = "volume.meta"
	RevisionCounterFile = "revision.counter"
	HeaderFile          = "replica.hdr"
	LiveCounterFile     = "live.counter"

	headPrefix = "volume-head-"
	snapPrefix = "volume-snap-"
	imgSuffix  = ".img"
	metaSuffix = ".meta"
)

// BlockSize is the volume sector: the read-modify-write unit and the
// granularity at which a layer of the chain owns data.
const BlockSize = 4096

// MaxChain is the longest snapshot chain Longhorn supports (its location map
// stores a one-byte layer index); longer chains are refused as corrupt.
const MaxChain = 250

// HeadName returns the head image name for index n: volume-head-NNN.img.
func HeadName(n int) string { return fmt.Sprintf("%s%03d%s", headPrefix, n, imgSuffix) }

// SnapshotName returns the image name of snapshot name: volume-snap-NAME.img.
func SnapshotName(name string) string { return snapPrefix + name + imgSuffix }

// MetaName returns the metadata file of an image: IMG.meta.
func MetaName(img string) string { return img + metaSuffix }

// headIndex parses volume-head-NNN.img.
func headIndex(img string) (int, bool) {
	s, ok := strings.CutPrefix(img, headPrefix)
	if !ok {
		return 0, false
	}
	s, ok = strings.CutSuffix(s, imgSuffix)
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(s)
	return n, err == nil && n >= 0
}

// validSnapshotName reports whether name can be a snapshot name: non-empty,
// at most 200 bytes, letters, digits, '-', '_' and '.' only (no path
// separators, so the file stays inside the directory).
func validSnapshotName(name string) bool {
	if name == "" || len(name) > 200 || name == "." || name == ".." {
		return false
	}
	for _, c := range []byte(name) {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}

// VolumeMeta is volume.meta, field for field as Longhorn writes it.
type VolumeMeta struct {
	Size            int64
	Head            string
	Dirty           bool
	Rebuilding      bool
	Error           string
	Parent          string
	SectorSize      int64
	BackingFilePath string
	Encrypted       bool
}

// DiskMeta is the .meta of one image (head or snapshot), as Longhorn writes it.
// Parent is the parent image's file name ("" at the bottom of the chain).
type DiskMeta struct {
	Name        string
	Parent      string
	Removed     bool
	UserCreated bool
	Created     string
	Labels      map[string]string
}

// ReadVolumeMeta reads and checks dir/volume.meta.
func ReadVolumeMeta(dir string) (VolumeMeta, error) {
	path := filepath.Join(dir, VolumeMetaFile)
	var m VolumeMeta
	b, err := os.ReadFile(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return m, fmt.Errorf("%s: %w: %w", dir, ErrNotReplica, err)
		}
		return m, err
	}
	return ParseVolumeMeta(path, b)
}

// ParseVolumeMeta parses and checks the content b of volume.meta at path.
func ParseVolumeMeta(path string, b []byte) (VolumeMeta, error) {
	var m VolumeMeta
	if err := json.Unmarshal(b, &m); err != nil {
		return m, corruptf(path, "%v", err)
	}
	switch {
	case m.Size <= 0:
		return m, corruptf(path, "size %d", m.Size)
	case m.Head == "" || filepath.Base(m.Head) != m.Head:
		return m, corruptf(path, "bad head name %q", m.Head)
	case m.SectorSize != 0 && m.SectorSize != 512 && m.SectorSize != BlockSize:
		return m, corruptf(path, "sector size %d", m.SectorSize)
	}
	return m, nil
}

// ReadDiskMeta reads dir/IMG.meta.
func ReadDiskMeta(dir, img string) (DiskMeta, error) {
	path := filepath.Join(dir, MetaName(img))
	var m DiskMeta
	b, err := os.ReadFile(path)
	if err != nil {
		return m, err
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return m, corruptf(path, "%v", err)
	}
	if m.Parent != "" && filepath.Base(m.Parent) != m.Parent {
		return m, corruptf(path, "bad parent name %q", m.Parent)
	}
	return m, nil
}

// Chain returns the image names of the live chain of dir, head first, by
// walking Parent links from volume.meta's head. Every image must exist. A
// directory marked Rebuilding, or whose rebuild has not committed (a
// staging directory and no head .meta), fails with ErrRebuilding: it is
// incomplete.
func Chain(dir string) ([]string, VolumeMeta, error) { return chainOf(dir, false) }

// chainOf is Chain; rebuilding accepts a directory marked Rebuilding (the
// write-only member of a live rebuild opens it).
func chainOf(dir string, rebuilding bool) ([]string, VolumeMeta, error) {
	vm, err := ReadVolumeMeta(dir)
	if err != nil {
		if errors.Is(err, ErrNotReplica) && pendingRebuild(dir, "") {
			return nil, vm, fmt.Errorf("%s: %w (%w)", dir, ErrRebuilding, err)
		}
		return nil, vm, err
	}
	if vm.Rebuilding && !rebuilding || pendingRebuild(dir, vm.Head) {
		// Marked, or a rebuild's staged copy is not published: the head's
		// .meta, published last, is missing (see publish).
		return nil, vm, fmt.Errorf("%s: %w", dir, ErrRebuilding)
	}
	chain := []string{vm.Head}
	seen := map[string]bool{vm.Head: true}
	for img := vm.Head; ; {
		if _, err := os.Stat(filepath.Join(dir, img)); err != nil {
			return nil, vm, fmt.Errorf("%s: %w: chain image: %w", dir, ErrCorrupt, err)
		}
		dm, err := ReadDiskMeta(dir, img)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) && img != vm.Head {
				// Longhorn tolerates a snapshot without .meta only at
				// the bottom; we require it everywhere but the head.
				return nil, vm, fmt.Errorf("%s: %w: %w", dir, ErrCorrupt, err)
			}
			if !errors.Is(err, fs.ErrNotExist) {
				return nil, vm, err
			}
			dm.Parent = vm.Parent
		}
		if dm.Parent == "" {
			return chain, vm, nil
		}
		if seen[dm.Parent] || len(chain) >= MaxChain {
			return nil, vm, corruptf(filepath.Join(dir, MetaName(img)), "chain loops or exceeds %d layers at %q", MaxChain, dm.Parent)
		}
		seen[dm.Parent] = true
		chain = append(chain, dm.Parent)
		img = dm.Parent
	}
}

// fileMode is the mode Longhorn gives a file of the directory (before the
// umask): revision.counter 0600 (revision_counter.go revisionFileMode),
// images, .meta and volume.meta 0644 (replica.go openFile and
// encodeToFile: 0666 under the usual umask 022, made explicit here). Our
// own replica.hdr and live.counter stay private.
func fileMode(name string) os.FileMode {
	switch name {
	case RevisionCounterFile, HeaderFile, LiveCounterFile:
		return 0o600
	}
	return 0o644
}

// writeFileAtomic replaces dir/name with data: write name.tmp, fsync it,
// rename over name, fsync the directory. A crash leaves either the old or
// the new content, never a mix (Longhorn skips both fsyncs).
func writeFileAtomic(dir, name string, data []byte) error {
	path := filepath.Join(dir, name)
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, fileMode(name))
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = fdatasync(f)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return err
	}
	return syncDir(dir)
}

func writeJSONAtomic(dir, name string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return writeFileAtomic(dir, name, b)
}

// syncDir fsyncs a directory so that creates, renames and unlinks in it are durable.
func syncDir(dir string) error { return target.SyncDir(dir) }

// fdatasync flushes f's data and the metadata needed to read it back.
func fdatasync(f *os.File) error {
	if err := target.Fdatasync(f); err != nil {
		return &fs.PathError{Op: "fdatasync", Path: f.Name(), Err: err}
	}
	return nil
}

// newDiskMeta is the .meta of a fresh image.
func newDiskMeta(img, parent string, now time.Time) DiskMeta {
	return DiskMeta{Name: img, Parent: parent, Created: now.UTC().Format(time.RFC3339)}
}
