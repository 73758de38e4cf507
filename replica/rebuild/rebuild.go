package rebuild

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/sparsesync/sparsesync/localsync"
	"github.com/sparsesync/sparsesync/qos"
	"github.com/sparsesync/sparsesync/replica"
	"github.com/sparsesync/sparsesync/tcpsync"
)

// Rebuild paths, as Stats.Path reports them.
const (
	PathLocal    = "local"
	PathTCP      = "tcp"
	PathLocalTCP = "local+tcp"
)

// Options configure Rebuild. The zero value copies locally only.
type Options struct {
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
	// not take it itself (it would fail with replica.ErrBusy). The caller owns the
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

// File is what the rebuild did to one file.
type File struct {
	Name           string `json:"name"`
	CopiedBytes    int64  `json:"copied_bytes"`
	ClonedBytes    int64  `json:"cloned_bytes"`
	UnchangedBytes int64  `json:"unchanged_bytes"`
	// Throttled is the time the copy waited on Options.Budget.
	Throttled time.Duration `json:"-"`
}

// Stats say what Rebuild did.
type Stats struct {
	Source string
	Target string
	// Path is PathLocal, PathTCP or PathLocalTCP (the local copy failed and
	// the network copy completed the rebuild).
	Path string
	// Files lists the data and metadata files copied (the image chain and
	// its .meta files), in copy order, from the path that completed.
	Files []File
	// FallbackReason is why the local copy failed ("" when it did not).
	FallbackReason string
	// Counter is the target's revision-counter mode (the source's):
	// CounterOff for a replica that keeps none (Longhorn's default since
	// 1.7), when Revision means nothing.
	Counter replica.CounterMode
	// Revision is the revision counter given to the target (the source's);
	// 0 when Counter is CounterOff.
	Revision int64
	Elapsed  time.Duration
}

// Rebuild makes the replica directory target an identical copy of the
// replica in source, so that target opens as a healthy replica of the same
// volume. The source must not be written meanwhile: Rebuild holds the
// source directory's lock (a Replica open there makes it fail with replica.ErrBusy,
// and Open fails with replica.ErrBusy while the rebuild runs). For a volume
// that keeps taking writes use AddReplica.
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
// branch a revert abandoned (see replica.SourceFiles); over TCP the server's
// listing of the directory (tcpsync.List) finds them.
//
// Until the commit no tool takes the target for a replica: Longhorn reads
// only the top level and finds no head .meta there (or no disk at all),
// and Open, Check and OpenChain fail with replica.ErrRebuilding. A rebuild that
// was killed is completed by the next, which reuses the staged files. A
// rebuild that fails removes the staging directory and, unless it holds a
// committed replica, the top level (see replica.Stage.Purge).
func Rebuild(ctx context.Context, source, target string, opts *Options) (Stats, error) {
	start := time.Now()
	o := opts.clone()
	if o.RemoteDir == "" && source != "" {
		o.RemoteDir = filepath.Base(source)
	}
	st := Stats{Source: source, Target: target}
	if source == "" && o.Remote == "" {
		return st, errors.New("rebuild: neither a local source nor a remote server")
	}
	if source != "" && replica.SameDir(source, target) {
		return st, fmt.Errorf("rebuild %s: source and target are the same directory", target)
	}
	if err := os.MkdirAll(target, 0o700); err != nil {
		return st, err
	}
	lock, err := replica.LockDir(target)
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
			if sl, err := replica.LockDir(source); errors.Is(err, replica.ErrBusy) {
				return st, fmt.Errorf("rebuild from %w", err)
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
		if perr := replica.NewStage(target, nil).Purge(); perr != nil {
			err = errors.Join(err, fmt.Errorf("removing the incomplete copy: %w", perr))
		}
		return st, fmt.Errorf("rebuild %s: %w", target, err)
	}
	return st, nil
}

type rebuildResult struct {
	files    []File
	counter  replica.CounterMode
	revision int64
}

// rebuildLocal copies from a source directory on this machine into the
// staging directory and publishes the copy. On error the files it created
// in the staging directory are removed (copyLocal).
func rebuildLocal(ctx context.Context, source, target string, o *Options) (res rebuildResult, err error) {
	chain, vm, err := replica.Chain(source)
	if err != nil {
		return res, err
	}
	counters, err := replica.ReadSourceCounters(source, chain)
	if err != nil {
		return res, err
	}
	names, err := replica.SourceFiles(source, chain)
	if err != nil {
		return res, err
	}
	st := replica.NewStage(target, o.fault)
	if err := st.Demote(); err != nil {
		return res, err
	}
	stage := st.Dir()
	if err := st.Clean(names); err != nil {
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
	if err := o.injected("local", replica.VolumeMetaFile); err != nil {
		return res, err
	}
	if res.counter, res.revision, err = st.Finish(vm, counters); err != nil {
		return res, err
	}
	return res, st.Publish(names)
}

// clone returns the caller's options (the defaults when nil) as the
// callee's own copy with the defaults filled in (a Logger; for the TCP
// copy, Rebuild's and AddReplica's alike, Budget and ReadBackOn).
func (o *Options) clone() Options {
	var c Options
	if o != nil {
		c = *o
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.TCP.Budget == (qos.Budget{}) {
		c.TCP.Budget = c.Budget
	}
	if c.TCP.ReadBack == tcpsync.ReadBackAuto {
		// A replica must hold the source's bytes as stored, not as sent.
		c.TCP.ReadBack = tcpsync.ReadBackOn
	}
	return c
}

func (o *Options) injected(step, name string) error {
	if o.fault == nil {
		return nil
	}
	return o.fault(step, name)
}

// rebuildTCP pulls the source directory from the tcpsync server into the
// staging directory and publishes the copy.
func rebuildTCP(ctx context.Context, target string, o *Options) (res rebuildResult, err error) {
	if o.Remote == "" {
		return res, errors.New("no remote server for the network copy")
	}
	remote := func(name string) string { return path.Join(filepath.ToSlash(o.RemoteDir), name) }
	st := replica.NewStage(target, o.fault)
	dir := st.Dir()
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
	b, err := stage(replica.VolumeMetaFile)
	if err != nil {
		return res, err
	}
	vm, err := replica.ParseVolumeMeta(filepath.Join(o.Remote, remote(replica.VolumeMetaFile)), b)
	if err != nil {
		return res, err
	}
	// The source answers: from here on the target's older copy, if any,
	// is taken apart (and reused for an incremental copy).
	if err := st.Demote(); err != nil {
		return res, err
	}
	var hdr, rc, live []byte
	for _, f := range []struct {
		name string
		dst  *[]byte
	}{{replica.HeaderFile, &hdr}, {replica.RevisionCounterFile, &rc}, {replica.LiveCounterFile, &live}} {
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
		if !replica.ValidImageName(img) {
			// The names come from the peer and become local file names.
			return res, fmt.Errorf("%s: %w: image name %q is not a head or snapshot image", remote(replica.VolumeMetaFile), replica.ErrCorrupt, img)
		}
		if len(chain) >= replica.MaxChain || slices.Contains(chain, img) {
			return res, fmt.Errorf("%s: %w: chain loops or exceeds %d layers", remote(replica.MetaName(img)), replica.ErrCorrupt, replica.MaxChain)
		}
		chain = append(chain, img)
		name := replica.MetaName(img)
		if err := o.injected("tcp", name); err != nil {
			return res, err
		}
		st, err := tcpsync.Pull(ctx, o.Remote, remote(name), filepath.Join(dir, name), &o.TCP)
		if err != nil {
			return res, err
		}
		res.files = append(res.files, File{Name: name, CopiedBytes: st.CopiedBytes, UnchangedBytes: st.UnchangedBytes, Throttled: st.Throttled})
		dm, err := replica.ReadDiskMeta(dir, img)
		if err != nil {
			return res, err
		}
		img = dm.Parent
	}
	// The disks no chain names (the snapshots of a branch abandoned by a
	// revert) are the user's too: list the source directory and copy them
	// first, as the local path does (replica.SourceFiles).
	listed, err := tcpsync.List(ctx, o.Remote, filepath.ToSlash(o.RemoteDir), &o.TCP)
	if err != nil {
		return res, err
	}
	extra, err := replica.OffChain(o.Remote+" "+o.RemoteDir, listed, chain)
	if err != nil {
		return res, err
	}
	var names []string
	for _, img := range extra {
		names = append(names, replica.MetaName(img), img)
	}
	all := append(slices.Clone(names), replica.ChainFiles(chain)...)
	if err := st.Clean(all); err != nil {
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
	if err := o.injected("tcp", replica.VolumeMetaFile); err != nil {
		return res, err
	}
	counters := replica.ParseSourceCounters(remote(""), hdr, rc, live)
	if res.counter, res.revision, err = st.Finish(vm, counters); err != nil {
		return res, err
	}
	return res, st.Publish(all)
}

// copyTCP pulls names from the source directory on the tcpsync server into
// target, each verified end to end by tcpsync, only what differs moving.
func copyTCP(ctx context.Context, target string, names []string, o *Options) ([]File, error) {
	var files []File
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
			return files, fmt.Errorf("%w: %s: not verified", replica.ErrVerify, name)
		}
		files = append(files, File{Name: name, CopiedBytes: st.CopiedBytes, UnchangedBytes: st.UnchangedBytes, Throttled: st.Throttled})
	}
	return files, nil
}

// pullMulti fetches the disk image name from Remote and MoreRemotes at
// once, Remote's version anchoring what the others must agree with.
func pullMulti(ctx context.Context, remote, name, dst string, o *Options) (tcpsync.Stats, error) {
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

// copyLocal copies names from source to target with localsync, verifying
// each; on error it removes the files it created.
func copyLocal(ctx context.Context, source, target string, names []string, o *Options) (files []File, err error) {
	var created []string
	defer func() {
		if err != nil {
			for _, p := range slices.Backward(created) {
				os.Remove(p)
			}
		}
	}()
	for _, name := range names {
		if err := o.injected("local", name); err != nil {
			return files, err
		}
		src, dst := filepath.Join(source, name), filepath.Join(target, name)
		if _, err := os.Lstat(dst); err != nil {
			created = append(created, dst)
		}
		cst, err := localsync.Copy(ctx, src, dst, &localsync.Options{Logger: o.Logger, Budget: o.Budget})
		if err != nil {
			return files, err
		}
		if err := verifyCopy(ctx, src, dst, o.Budget.Read); err != nil {
			return files, err
		}
		files = append(files, File{Name: name, CopiedBytes: cst.CopiedBytes, ClonedBytes: cst.ClonedBytes, UnchangedBytes: cst.UnchangedBytes, Throttled: cst.Throttled})
	}
	return files, nil
}
