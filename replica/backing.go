package replica

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// backingSectorSize is the size a backing file must be a multiple of
// (Longhorn's util.BackingImageSectorSize).
const backingSectorSize = 512

// backingMagics are the formats qemu-img info recognises that are not raw
// (Longhorn's backingfile.OpenBackingFile asks qemu-img for the format and
// reads "raw" as is, "qcow2" with its own reader, refuses the rest). The
// probe is qemu's: a signature at a fixed offset.
var backingMagics = []struct {
	name  string
	off   int
	magic []byte
}{
	{"qcow2", 0, []byte("QFI\xfb")}, // qcow and qcow2 share it
	{"qed", 0, []byte("QED\x00")},
	{"vmdk", 0, []byte("KDMV")},
	{"vmdk", 0, []byte("# Disk DescriptorFile")},
	{"vdi", 0x40, []byte{0x7f, 0x10, 0xda, 0xbe}},
	{"vhdx", 0, []byte("vhdxfile")},
	{"vpc", 0, []byte("conectix")},
	{"luks", 0, []byte("LUKS\xba\xbe")},
	{"parallels", 0, []byte("WithoutFreeSpace")},
	{"parallels", 0, []byte("WithouFreSpacExt")},
	{"bochs", 0, []byte("Bochs Virtual HD Image")},
}

// resolveBackingPath is Longhorn's util.ResolveBackingFilepath: a directory
// must hold exactly one file, which is the backing file. A relative path is
// taken relative to the replica directory.
func resolveBackingPath(dir, p string) (string, error) {
	if !filepath.IsAbs(p) {
		p = filepath.Join(dir, p)
	}
	fi, err := os.Stat(p)
	if err != nil {
		return "", fmt.Errorf("%s: backing file: %w", filepath.Join(dir, VolumeMetaFile), err)
	}
	if !fi.IsDir() {
		return p, nil
	}
	ents, err := os.ReadDir(p)
	if err != nil {
		return "", err
	}
	if len(ents) != 1 || ents[0].IsDir() {
		return "", fmt.Errorf("%s: backing file directory %s: expected exactly one file, found %d entries", filepath.Join(dir, VolumeMetaFile), p, len(ents))
	}
	return filepath.Join(p, ents[0].Name()), nil
}

// openBacking opens the raw backing file volume.meta names, read-only, as
// the bottom layer of the chain (Longhorn's insertBackingFile puts it at
// index 1, below every image). nil when there is none. A backing file in
// a format other than raw fails with ErrBackingFormat: reading it as raw
// or skipping it would return wrong bytes or zeros.
func openBacking(dir string, vm VolumeMeta) (*os.File, error) {
	if vm.BackingFilePath == "" {
		return nil, nil
	}
	p, err := resolveBackingPath(dir, vm.BackingFilePath)
	if err != nil {
		return nil, err
	}
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	if err := checkRawBacking(f); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

func checkRawBacking(f *os.File) error {
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%s: %w: not a regular file", f.Name(), ErrBackingFormat)
	}
	if fi.Size()%backingSectorSize != 0 {
		return fmt.Errorf("%s: %w: size %d is not a multiple of %d (Longhorn refuses it too)", f.Name(), ErrBackingFormat, fi.Size(), backingSectorSize)
	}
	head := make([]byte, 512)
	n, err := f.ReadAt(head, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	head = head[:n]
	for _, m := range backingMagics {
		if len(head) >= m.off+len(m.magic) && bytes.Equal(head[m.off:m.off+len(m.magic)], m.magic) {
			return fmt.Errorf("%s: %w: %s (only raw backing files are read; convert it with qemu-img convert -O raw)", f.Name(), ErrBackingFormat, m.name)
		}
	}
	return nil
}

// readLayer reads len(b) bytes of a layer at off; what lies past the
// layer's end reads as zeros (a layer older than an expansion, or a
// backing file whose size is a multiple of 512 only), as Longhorn's
// diff_disk.go read does.
func readLayer(f *os.File, b []byte, off int64) error {
	n, err := f.ReadAt(b, off)
	if errors.Is(err, io.EOF) {
		clear(b[n:])
		return nil
	}
	return err
}
