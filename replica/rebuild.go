package replica

import (
	"github.com/sparsesync/sparsesync/qos"

	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/sparsesync/sparsesync/sparse"
	"github.com/sparsesync/sparsesync/tcpsync"
)

// Rebuild paths, as RebuildStats.Path reports them.
const (
	PathLocal    = "local"
	PathTCP      = "tcp"
	PathLocalTCP = "local+tcp"
)

// RebuildOptions configure Rebuild. The zero value copies locally only.
type RebuildOptions struct {
	// Remote is the address of a tcpsync server that serves the source
	// replica directory: the fallback when the local copy fails, and the
	// only path when Rebuild gets no local source. "" means no fallback.
	Remote string
	// RemoteDir is the source directory's name beneath that server's root;
	// "" means the last element of the source path.
	RemoteDir string
	// MoreRemotes are more servers holding healthy copies of the source
	// (each Remote is the copy's directory beneath that server's root):
	// the TCP path then fetches the disk images from Remote and all of
	// them at once (tcpsync.PullMulti), each piece verified against the
	// version Remote serves (its metadata is what the target gets); a copy
	// that differs is dropped, one that fails loses its pieces to the others.
	MoreRemotes []tcpsync.MultiSource
	// TCP configures the network copy (Token or NoAuth, TLSConfig, retries).
	// Its ReadBack is tcpsync.ReadBackOn when left at ReadBackAuto: every
	// pulled file is read back from storage after its fdatasync and checked
	// whole against the source (tcpsync.ReadBack); ReadBackOff skips that.
	TCP tcpsync.Options
	// Logger receives the fallback warning and per-file debug records; nil
	// discards them.
	Logger *slog.Logger
	// SourceLocked says the caller holds the source directory's lock (the
	// one Open takes) and keeps it until Rebuild returns, so Rebuild does
	// not take it itself (it would fail with ErrBusy). The caller owns the
	// promise that no writer changes the source meanwhile. The disk agent
	// (scheduler/disks) uses it: it holds the lock across a whole move.
	SourceLocked bool
	// Budget bounds the bytes per second the rebuild reads from storage
	// and writes to it (package qos): the local copy and its verification
	// read, and the network copy (its reads and writes here and its wire
	// bytes) unless TCP.Budget is set. The zero Budget is unlimited.
	Budget qos.Budget

	// fault, when set, is called before each step ("local", "tcp") with the
	// file name; its error fails that step (tests only).
	fault func(step, name string) error
}

// RebuildFile is what the rebuild did to one file.
type RebuildFile struct {
	Name           string `json:"name"`
	CopiedBytes    int64  `json:"copied_bytes"`
	ClonedBytes    int64  `json:"cloned_bytes"`
	UnchangedBytes int64  `json:"unchanged_bytes"`
	// Throttled is the time the copy waited on RebuildOptions.Budget.
	Throttled time.Duration `json:"-"`
}

// RebuildStats say what Rebuild did.
type RebuildStats struct {
	Source string
	Target string
	// Path is PathLocal, PathTCP or PathLocalTCP (the local copy failed and
	// the network copy completed the rebuild).
	Path string
	// Files lists the data and metadata files copied (the image chain and
	// its .meta files), in copy order, from the path that completed.
	Files []RebuildFile
	// FallbackReason is why the local copy failed ("" when it did not).
	FallbackReason string
	// Counter is the target's revision-counter mode (the source's):
	// CounterOff for a replica that keeps none (Longhorn's default since
	// 1.7), when Revision means nothing.
	Counter CounterMode
	// Revision is the revision counter given to the target (the source's);
	// 0 when Counter is CounterOff.
	Revision int64
	Elapsed  time.Duration
}

// Rebuild makes the replica directory target an identical copy of the
// replica in source, so that target opens as a healthy replica of the same
// volume. The source must not be written meanwhile: Rebuild holds the
// source directory's lock (a Replica open there makes it fail with ErrBusy,
// and Open fails with ErrBusy while the rebuild runs). For a volume
// that keeps taking writes use Volume.AddReplica.
//
// source names the source directory on this machine; "" means it is not on
// this machine. Each file is first copied with localsync (reflinks where
// the filesystem can, else copy_file_range or read/write, writing only what
// differs from an older copy already in target) and verified by comparing
// bytes. If any local step fails, every file the local attempt created in
// target is removed, a warning is logged and the copy is made again over
// TCP from opts.Remote (RemoteDir beneath its root), writing only what
// differs there too. With no local source, Rebuild goes straight to TCP.
//
//	lock target; read the source's volume.meta
//	demote: move target's images and .meta into target/StagingDir (the
//	    head's .meta first), drop its counters, volume.meta last
//	remove staged files that are not in the source's listing
//	copy + verify + fdatasync each image and .meta into the staging
//	    directory, oldest snapshot first (what differs only)
//	staged revision.counter, replica.hdr := the source's count, mode,
//	    volume and epoch; staged volume.meta := the source's
//	publish: rename every staged file to the top level, the head's .meta
//	    last (the commit); remove the staging directory
//
// Every disk the source lists is copied, including the snapshots of a
// branch a revert abandoned (see sourceFiles); over TCP the server's
// listing of the directory (tcpsync.List) finds them.
//
// Until the commit no tool takes the target for a replica: Longhorn reads
// only the top level and finds no head .meta there (or no disk at all),
// and Open, Check and OpenChain fail with ErrRebuilding. A rebuild that
// was killed is completed by the next, which reuses the staged files. A
// rebuild that fails removes the staging directory and, unless it holds a
// committed replica, the top level (see purgeFailed).
func Rebuild(ctx context.Context, source, target string, opts *RebuildOptions) (RebuildStats, error) {
	start := time.Now()
	var o RebuildOptions
	if opts != nil {
		o = *opts
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.TCP.Budget == (qos.Budget{}) {
		o.TCP.Budget = o.Budget
	}
	if o.TCP.ReadBack == tcpsync.ReadBackAuto {
		// A replica must hold the source's bytes as stored, not as sent.
		o.TCP.ReadBack = tcpsync.ReadBackOn
	}
	if o.RemoteDir == "" && source != "" {
		o.RemoteDir = filepath.Base(source)
	}
	st := RebuildStats{Source: source, Target: target}
	if source == "" && o.Remote == "" {
		return st, errors.New("replica: rebuild: neither a local source nor a remote server")
	}
	if source != "" && sameDir(source, target) {
		return st, fmt.Errorf("replica: rebuild %s: source and target are the same directory", target)
	}
	if err := os.MkdirAll(target, 0o700); err != nil {
		return st, err
	}
	lock, err := lockDir(target)
	if err != nil {
		return st, err
	}
	defer lock.Close()

	var res rebuildResult
	if source != "" {
		// No writer may change the source while it is copied: take its
		// directory lock (Open takes the same one), unless the caller
		// holds it.
		if !o.SourceLocked {
			if sl, err := lockDir(source); errors.Is(err, ErrBusy) {
				return st, fmt.Errorf("replica: rebuild from %w", err)
			} else if err == nil {
				defer sl.Close()
			}
		}
		st.Path = PathLocal
		res, err = rebuildLocal(ctx, source, target, &o)
		if err != nil && o.Remote != "" && ctx.Err() == nil {
			st.FallbackReason = err.Error()
			o.Logger.Warn("replica rebuild: local copy failed, falling back to TCP",
				"source", source, "target", target, "remote", o.Remote, "err", err)
			st.Path = PathLocalTCP
			res, err = rebuildTCP(ctx, target, &o)
		}
	} else {
		st.Path = PathTCP
		res, err = rebuildTCP(ctx, target, &o)
	}
	st.Files, st.Counter, st.Revision = res.files, res.counter, res.revision
	st.Elapsed = time.Since(start)
	if err != nil {
		if perr := purgeFailed(target); perr != nil {
			err = errors.Join(err, fmt.Errorf("removing the incomplete copy: %w", perr))
		}
		return st, fmt.Errorf("replica: rebuild %s: %w", target, err)
	}
	return st, nil
}

// purgeFailed removes what a failed rebuild leaves in target, so that no
// tool takes it for a replica: Longhorn opens a directory whatever its
// Rebuilding flag says, and re-creates a missing volume.meta from the
// first entry whose name contains volume-head (replica.go
// tryRecoverVolumeMetaFile). The staging directory goes; the top level
// goes too unless it holds a committed replica (the rebuild failed before
// it demoted an older copy, or after its commit). The top level is
// removed in topLevelOrder, so an interrupted purge leaves nothing
// adoptable either.
func purgeFailed(target string) error {
	if !committed(target) {
		if err := removeTopLevel(target); err != nil {
			return err
		}
	}
	if err := os.RemoveAll(stagingPath(target)); err != nil {
		return err
	}
	return syncDir(target)
}

func sameDir(a, b string) bool {
	sa, err1 := os.Stat(a)
	sb, err2 := os.Stat(b)
	if err1 == nil && err2 == nil {
		return os.SameFile(sa, sb)
	}
	return filepath.Clean(a) == filepath.Clean(b)
}

type rebuildResult struct {
	files    []RebuildFile
	counter  CounterMode
	revision int64
}

// markRebuilding writes target/volume.meta as the source's with Rebuilding
// set: from here on the target does not open until finish.
func markRebuilding(target string, vm VolumeMeta) error {
	vm.Rebuilding, vm.Dirty = true, false
	return writeJSONAtomic(target, VolumeMetaFile, vm)
}

// chainFiles lists the files to copy for a chain (head first): the images
// and their .meta files, oldest snapshot first, the head last.
func chainFiles(chain []string) []string {
	var names []string
	for _, img := range slices.Backward(chain) {
		names = append(names, img, MetaName(img))
	}
	return names
}

// sourceFiles lists the files a rebuild copies from source: every disk
// the source lists, not only the live chain. Longhorn lists a disk for
// every image .meta in the directory (replica.go readMetadata, ListDisks)
// and its rebuild syncs all of them but the head and the backing file
// (controller/util.go GetReplicaDisksAndHead, controller/rebuild.go), so
// the snapshots of a branch abandoned by a revert stay the user's. Those
// come first (sorted), then the chain, oldest first, the head last. A
// listed snapshot whose image is missing is corrupt (Longhorn's sync of
// it fails too); a head .meta without its image is what an interrupted
// snapshot leaves and is skipped.
func sourceFiles(source string, chain []string) ([]string, error) {
	extra, err := offChainDisks(source, chain)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, img := range extra {
		names = append(names, img, MetaName(img))
	}
	return append(names, chainFiles(chain)...), nil
}

// offChainDisks lists, sorted, the images of source that have a .meta but
// are not in chain (see sourceFiles).
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
	return offChain(source, names, chain)
}

// offChain picks, sorted, the images that have a .meta among names (the
// files of the directory where) but are not in chain. A listed snapshot
// whose image is missing is corrupt; a head .meta without its image (an
// interrupted snapshot) is skipped.
func offChain(where string, names, chain []string) ([]string, error) {
	var extra []string
	for _, n := range names {
		img, ok := strings.CutSuffix(n, metaSuffix)
		if !ok || !validImageName(img) || slices.Contains(chain, img) {
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

// cleanStage deletes from the staging directory everything but the
// files to copy (keep) and their tcpsync resume records: the chain files
// of an older copy that the source does not have, the counter files and
// volume.meta (finish writes them anew), and the temporary files a killed
// rebuild may have left.
func cleanStage(stage string, keep []string) error {
	ents, err := os.ReadDir(stage)
	if err != nil {
		return err
	}
	for _, e := range ents {
		n := e.Name()
		if slices.Contains(keep, strings.TrimSuffix(n, ".tcpsync")) {
			continue
		}
		if err := os.RemoveAll(filepath.Join(stage, n)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	return nil
}

// finish gives the staged copy in dir the source's counter state and a
// volume.meta not marked Rebuilding, and returns that counter mode and
// count. Every data file is already copied, verified and synced; publish
// then moves the copy to the target.
//
// cf are the source's counter files, judged as Open would (source names
// them in errors; ids identifies the source's chain images, nil over TCP,
// where only the counter files' own consistency tells a leftover header).
func finish(target string, vm VolumeMeta, source string, cf counterFiles, ids []fileIdent) (CounterMode, int64, error) {
	boot, err := currentBootID()
	if err != nil {
		return 0, 0, err
	}
	cs, err := cf.judge(source, ids, boot)
	if err != nil {
		return 0, 0, err
	}
	if cs.rcErr != nil {
		return 0, 0, cs.rcErr
	}
	mode, h, haveHdr, rev := cs.mode, cs.hdr, cs.haveHdr, cs.total()
	head, err := identOf(filepath.Join(target, vm.Head))
	if err != nil {
		return 0, 0, err
	}
	if err := syncDir(target); err != nil {
		return 0, 0, err
	}
	if mode.Enabled() {
		if err := writeFileAtomic(target, RevisionCounterFile, FormatRevisionCounter(rev)); err != nil {
			return 0, 0, err
		}
	} else if err := os.Remove(filepath.Join(target, RevisionCounterFile)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return 0, 0, err
	}
	if haveHdr {
		// Same volume, mode and epoch as the source; a replica id of its
		// own; the source's count, persisted as at a clean close.
		nh := header{gen: 1, mode: mode, clean: true, epoch: h.epoch, writeSeq: uint64(rev), rcSeq: uint64(rev),
			volumeID: h.volumeID, replicaID: newID(), bootID: boot, head: head}
		b := make([]byte, headerFileSize)
		nh.encode(b[:headerSlotSize])
		if err := writeFileAtomic(target, HeaderFile, b); err != nil {
			return 0, 0, err
		}
	} else if err := os.Remove(filepath.Join(target, HeaderFile)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return 0, 0, err
	}
	vm.Rebuilding, vm.Dirty = false, false
	if err := writeJSONAtomic(target, VolumeMetaFile, vm); err != nil {
		return 0, 0, err
	}
	return mode, rev, nil
}

// rebuildLocal copies from a source directory on this machine into the
// staging directory and publishes the copy. On error the files it created
// in the staging directory are removed (copyLocal).
func rebuildLocal(ctx context.Context, source, target string, o *RebuildOptions) (res rebuildResult, err error) {
	chain, vm, err := Chain(source)
	if err != nil {
		return res, err
	}
	cf, ids, err := readCounters(source, chain)
	if err != nil {
		return res, err
	}
	names, err := sourceFiles(source, chain)
	if err != nil {
		return res, err
	}
	stage, err := demote(target, o)
	if err != nil {
		return res, err
	}
	if err := cleanStage(stage, names); err != nil {
		return res, err
	}
	// A network copy's resume records no longer describe files the local
	// copy is about to rewrite.
	for _, name := range names {
		if err := os.Remove(filepath.Join(stage, name+".tcpsync")); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return res, err
		}
	}
	if res.files, err = copyLocal(ctx, source, stage, names, o); err != nil {
		return res, err
	}
	if err := o.injected("local", VolumeMetaFile); err != nil {
		return res, err
	}
	if res.counter, res.revision, err = finish(stage, vm, source, cf, ids); err != nil {
		return res, err
	}
	return res, publish(target, names, o)
}

func (o *RebuildOptions) injected(step, name string) error {
	if o.fault == nil {
		return nil
	}
	return o.fault(step, name)
}

// verifyCopy checks that dst reads as src. When both files map every
// extent to the same physical blocks of one device (a reflink copy, per
// FIEMAP) that is proof without reading; otherwise it compares byte for
// byte over the data of either (holes of both read as zeros, unread).
func verifyCopy(ctx context.Context, src, dst string, read *qos.Limiter) error {
	if ok, err := sameBlocks(ctx, src, dst); err != nil || ok {
		return err
	}
	sm, si, err := sparse.ReadMap(ctx, src)
	if err != nil {
		return err
	}
	dm, di, err := sparse.ReadMap(ctx, dst)
	if err != nil {
		return err
	}
	if si.Size != di.Size {
		return fmt.Errorf("%w: %s: size %d, source %s has %d", ErrVerify, dst, di.Size, src, si.Size)
	}
	sf, err := os.Open(src)
	if err != nil {
		return err
	}
	defer sf.Close()
	df, err := os.Open(dst)
	if err != nil {
		return err
	}
	defer df.Close()
	a, b := make([]byte, 1<<20), make([]byte, 1<<20)
	for _, e := range sm.Union(dm).Extents() {
		for off := e.Off; off < e.End(); {
			if err := ctx.Err(); err != nil {
				return err
			}
			n := min(int64(len(a)), e.End()-off)
			if p := read.Piece(); p > 0 {
				n = min(n, max(p/2, 4096)) // both reads in one piece: a steady rate
			}
			if err := read.Wait(ctx, 2*n); err != nil {
				return err
			}
			if _, err := sf.ReadAt(a[:n], off); err != nil && !errors.Is(err, io.EOF) {
				return err
			}
			if _, err := df.ReadAt(b[:n], off); err != nil && !errors.Is(err, io.EOF) {
				return err
			}
			if !bytes.Equal(a[:n], b[:n]) {
				return fmt.Errorf("%w: %s differs from %s in [%d, %d)", ErrVerify, dst, src, off, off+n)
			}
			off += n
		}
	}
	return nil
}

// rebuildTCP pulls the source directory from the tcpsync server into the
// staging directory and publishes the copy.
func rebuildTCP(ctx context.Context, target string, o *RebuildOptions) (res rebuildResult, err error) {
	if o.Remote == "" {
		return res, errors.New("no remote server for the network copy")
	}
	remote := func(name string) string { return path.Join(filepath.ToSlash(o.RemoteDir), name) }
	dir := stagingPath(target)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return res, err
	}
	// The source's volume.meta and counter files are read through a
	// temporary name: finish writes the target's own, and optional files
	// may be missing remotely.
	stage := func(name string) ([]byte, error) {
		tmp := filepath.Join(dir, ".pull-"+name)
		defer os.Remove(tmp)
		defer os.Remove(tmp + ".tcpsync")
		if err := o.injected("tcp", name); err != nil {
			return nil, err
		}
		if _, err := tcpsync.Pull(ctx, o.Remote, remote(name), tmp, &o.TCP); err != nil {
			return nil, err
		}
		return os.ReadFile(tmp)
	}
	b, err := stage(VolumeMetaFile)
	if err != nil {
		return res, err
	}
	vm, err := parseVolumeMeta(filepath.Join(o.Remote, remote(VolumeMetaFile)), b)
	if err != nil {
		return res, err
	}
	// The source answers: from here on the target's older copy, if any,
	// is taken apart (and reused for an incremental copy).
	if _, err := demote(target, o); err != nil {
		return res, err
	}
	var cf counterFiles
	for _, f := range []struct {
		name string
		dst  *[]byte
	}{{HeaderFile, &cf.hdr}, {RevisionCounterFile, &cf.rc}, {LiveCounterFile, &cf.live}} {
		b, err := stage(f.name)
		if err == nil {
			*f.dst = b
		} else if !errors.Is(err, tcpsync.ErrNotFound) && !errors.Is(err, fs.ErrNotExist) {
			return res, err
		}
	}
	// Walk the chain from the head through the pulled .meta files.
	var chain []string
	for img := vm.Head; img != ""; {
		if !validImageName(img) {
			// The names come from the peer and become local file names.
			return res, corruptf(remote(VolumeMetaFile), "image name %q is not a head or snapshot image", img)
		}
		if len(chain) >= MaxChain || slices.Contains(chain, img) {
			return res, corruptf(remote(MetaName(img)), "chain loops or exceeds %d layers", MaxChain)
		}
		chain = append(chain, img)
		name := MetaName(img)
		if err := o.injected("tcp", name); err != nil {
			return res, err
		}
		st, err := tcpsync.Pull(ctx, o.Remote, remote(name), filepath.Join(dir, name), &o.TCP)
		if err != nil {
			return res, err
		}
		res.files = append(res.files, RebuildFile{Name: name, CopiedBytes: st.CopiedBytes, UnchangedBytes: st.UnchangedBytes, Throttled: st.Throttled})
		dm, err := ReadDiskMeta(dir, img)
		if err != nil {
			return res, err
		}
		img = dm.Parent
	}
	// The disks no chain names (the snapshots of a branch abandoned by a
	// revert) are the user's too: list the source directory and copy them
	// first, as the local path does (sourceFiles).
	listed, err := tcpsync.List(ctx, o.Remote, filepath.ToSlash(o.RemoteDir), &o.TCP)
	if err != nil {
		return res, err
	}
	extra, err := offChain(o.Remote+" "+o.RemoteDir, listed, chain)
	if err != nil {
		return res, err
	}
	var names []string
	for _, img := range extra {
		names = append(names, MetaName(img), img)
	}
	all := append(slices.Clone(names), chainFiles(chain)...)
	if err := cleanStage(dir, all); err != nil {
		return res, err
	}
	for _, img := range slices.Backward(chain) {
		names = append(names, img)
	}
	files, err := copyTCP(ctx, dir, names, o)
	res.files = append(res.files, files...)
	if err != nil {
		return res, err
	}
	if err := o.injected("tcp", VolumeMetaFile); err != nil {
		return res, err
	}
	if res.counter, res.revision, err = finish(dir, vm, remote(""), cf, nil); err != nil {
		return res, err
	}
	return res, publish(target, all, o)
}

// copyTCP pulls names from the source directory on the tcpsync server into
// target, each verified end to end by tcpsync, only what differs moving.
func copyTCP(ctx context.Context, target string, names []string, o *RebuildOptions) ([]RebuildFile, error) {
	var files []RebuildFile
	for _, name := range names {
		if err := o.injected("tcp", name); err != nil {
			return files, err
		}
		remote := path.Join(filepath.ToSlash(o.RemoteDir), name)
		var st tcpsync.Stats
		var err error
		if len(o.MoreRemotes) > 0 && strings.HasSuffix(name, ".img") {
			st, err = pullMulti(ctx, remote, name, filepath.Join(target, name), o)
		} else {
			st, err = tcpsync.Pull(ctx, o.Remote, remote, filepath.Join(target, name), &o.TCP)
		}
		if err != nil {
			return files, err
		}
		if !st.Verified {
			return files, fmt.Errorf("%w: %s: not verified", ErrVerify, name)
		}
		files = append(files, RebuildFile{Name: name, CopiedBytes: st.CopiedBytes, UnchangedBytes: st.UnchangedBytes, Throttled: st.Throttled})
	}
	return files, nil
}

// pullMulti fetches the disk image name from Remote and MoreRemotes at
// once, Remote's version anchoring what the others must agree with.
func pullMulti(ctx context.Context, remote, name, dst string, o *RebuildOptions) (tcpsync.Stats, error) {
	srcs := []tcpsync.MultiSource{{Addr: o.Remote, Remote: remote, Anchor: true}}
	for _, r := range o.MoreRemotes {
		r.Remote, r.Anchor = path.Join(r.Remote, name), false
		srcs = append(srcs, r)
	}
	ms, err := tcpsync.PullMulti(ctx, srcs, dst, &o.TCP)
	for _, s := range ms.Sources {
		if s.Dropped != "" {
			o.Logger.Warn("replica rebuild: source dropped", "file", name, "source", s.Source, "why", s.Dropped)
		}
	}
	return ms.Stats, err
}

// physExtent is a FIEMAP record reduced to what decides the content.
type physExtent struct {
	logical, physical, length int64
	unwritten                 bool
}

// physLayout returns f's extents, adjacent ones merged, or ok=false when
// a location is unknown or the data is not plainly stored.
func physLayout(ctx context.Context, f *os.File, size int64) (ext []physExtent, ok bool, err error) {
	const opaque = sparse.FiemapUnknown | sparse.FiemapDelalloc | sparse.FiemapEncoded | sparse.FiemapDataEncrypted |
		sparse.FiemapNotAligned | sparse.FiemapDataInline | sparse.FiemapDataTail
	ok = true
	err = sparse.Fiemap(ctx, f, 0, size, func(e sparse.FiemapExtent) error {
		if e.Flags&opaque != 0 || e.Physical == 0 {
			ok = false
			return errStopFiemap
		}
		x := physExtent{e.Logical, e.Physical, e.Length, e.Flags&sparse.FiemapUnwritten != 0}
		if n := len(ext); n > 0 {
			p := &ext[n-1]
			if p.logical+p.length == x.logical && p.physical+p.length == x.physical && p.unwritten == x.unwritten {
				p.length += x.length
				return nil
			}
		}
		ext = append(ext, x)
		return nil
	})
	if errors.Is(err, errStopFiemap) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, nil // no FIEMAP here: compare bytes
	}
	return ext, ok, nil
}

var errStopFiemap = errors.New("stop")

// sameBlocks reports whether src and dst are one size, on one device, and
// every extent of both lies on the same physical blocks.
func sameBlocks(ctx context.Context, src, dst string) (bool, error) {
	sf, err := os.Open(src)
	if err != nil {
		return false, err
	}
	defer sf.Close()
	df, err := os.Open(dst)
	if err != nil {
		return false, err
	}
	defer df.Close()
	si, err := sparse.Stat(sf)
	if err != nil {
		return false, err
	}
	di, err := sparse.Stat(df)
	if err != nil {
		return false, err
	}
	if si.Dev != di.Dev || si.Size != di.Size || si.Size == 0 {
		return false, nil
	}
	se, ok, err := physLayout(ctx, sf, si.Size)
	if err != nil || !ok || len(se) == 0 {
		return false, err
	}
	de, ok, err := physLayout(ctx, df, di.Size)
	if err != nil || !ok {
		return false, err
	}
	return slices.Equal(se, de), nil
}

// validImageName reports whether img is volume-head-NNN.img or
// volume-snap-NAME.img with a valid snapshot name.
func validImageName(img string) bool {
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
