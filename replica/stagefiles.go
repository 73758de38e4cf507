package replica

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// ChainFiles lists the files to copy for a chain (head first): the images
// and their .meta files, oldest snapshot first, the head last.
func ChainFiles(chain []string) []string {
	var names []string
	for _, img := range slices.Backward(chain) {
		names = append(names, img, MetaName(img))
	}
	return names
}

// SourceFiles lists the files a rebuild copies from source: every disk
// the source lists, not only the live chain. Longhorn lists a disk for
// every image .meta in the directory (replica.go readMetadata, ListDisks)
// and its rebuild syncs all of them but the head and the backing file
// (controller/util.go GetReplicaDisksAndHead, controller/rebuild.go), so
// the snapshots of a branch abandoned by a revert stay the user's. Those
// come first (sorted), then the chain, oldest first, the head last. A
// listed snapshot whose image is missing is corrupt (Longhorn's sync of
// it fails too); a head .meta without its image is what an interrupted
// snapshot leaves and is skipped.
func SourceFiles(source string, chain []string) ([]string, error) {
	extra, err := offChainDisks(source, chain)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, img := range extra {
		names = append(names, img, MetaName(img))
	}
	return append(names, ChainFiles(chain)...), nil
}

// offChainDisks lists, sorted, the images of source that have a .meta but
// are not in chain (see SourceFiles).
func offChainDisks(source string, chain []string) ([]string, error) {
	ents, err := os.ReadDir(source)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range ents {
		if !e.IsDir() {
			names = append(names, e.Name())
		}
	}
	return OffChain(source, names, chain)
}

// OffChain picks, sorted, the images that have a .meta among names (the
// files of the directory where) but are not in chain. A listed snapshot
// whose image is missing is corrupt; a head .meta without its image (an
// interrupted snapshot) is skipped.
func OffChain(where string, names, chain []string) ([]string, error) {
	var extra []string
	for _, n := range names {
		img, ok := strings.CutSuffix(n, metaSuffix)
		if !ok || !ValidImageName(img) || slices.Contains(chain, img) {
			continue
		}
		if !slices.Contains(names, img) {
			if _, head := headIndex(img); head {
				continue
			}
			return nil, fmt.Errorf("%s: %w: %s lists a disk whose image is missing", where, ErrCorrupt, n)
		}
		extra = append(extra, img)
	}
	slices.Sort(extra)
	return extra, nil
}

// isChainFile reports whether name is an image, image .meta or .checksum of
// a replica directory (what removeStale may delete).
func isChainFile(name string) bool {
	return (strings.HasPrefix(name, headPrefix) || strings.HasPrefix(name, snapPrefix)) &&
		(strings.HasSuffix(name, imgSuffix) || strings.HasSuffix(name, imgSuffix+metaSuffix) ||
			strings.HasSuffix(name, imgSuffix+".checksum") || strings.HasSuffix(name, imgSuffix+".tcpsync") ||
			strings.HasSuffix(name, imgSuffix+metaSuffix+".tcpsync"))
}

// ValidImageName reports whether img is volume-head-NNN.img or
// volume-snap-NAME.img with a valid snapshot name.
func ValidImageName(img string) bool {
	if _, ok := headIndex(img); ok {
		return true
	}
	name, ok := strings.CutPrefix(img, snapPrefix)
	if !ok {
		return false
	}
	name, ok = strings.CutSuffix(name, imgSuffix)
	return ok && validSnapshotName(name)
}

// SameDir reports whether a and b name one directory (by inode when both
// exist, else by cleaned path).
func SameDir(a, b string) bool {
	sa, err1 := os.Stat(a)
	sb, err2 := os.Stat(b)
	if err1 == nil && err2 == nil {
		return os.SameFile(sa, sb)
	}
	return filepath.Clean(a) == filepath.Clean(b)
}
