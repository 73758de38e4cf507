package rebuild

import (
	"context"
	"path/filepath"
	"time"

	"github.com/sparsesync/sparsesync/replica"
)

// AddReplica rebuilds the replica directory target from v's first healthy
// replica while v keeps taking writes, and adds it as a healthy member
// (replica.Volume.AddReplica, which says how): each snapshot image and
// .meta is copied locally first (localsync, verified and synced), with the
// TCP fallback from opts.Remote as in Rebuild.
//
// Only opts.Remote, RemoteDir, TCP, Budget and Logger are used. On failure
// the target is dropped and its incomplete copy removed; the volume goes
// on with its other members.
func AddReplica(ctx context.Context, v *replica.Volume, target string, opts *Options) (Stats, error) {
	start := time.Now()
	o := opts.clone()
	st := Stats{Target: target, Path: PathLocal}
	copyFiles := func(ctx context.Context, source, stage string, names []string) error {
		files, err := copyLocal(ctx, source, stage, names, &o)
		if err != nil && o.Remote != "" && ctx.Err() == nil {
			st.FallbackReason, st.Path = err.Error(), PathLocalTCP
			o.Logger.Warn("replica add: local copy failed, falling back to TCP",
				"source", source, "target", target, "remote", o.Remote, "err", err)
			if o.RemoteDir == "" {
				o.RemoteDir = filepath.Base(source)
			}
			files, err = copyTCP(ctx, stage, names, &o)
		}
		st.Files = files
		return err
	}
	add, err := v.AddReplica(ctx, target, &replica.AddOptions{Copy: copyFiles, Fault: o.fault})
	st.Source, st.Revision = add.Source, add.Revision
	st.Elapsed = time.Since(start)
	return st, err
}
