package replica_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sparsesync/sparsesync/replica"
	"github.com/sparsesync/sparsesync/replica/rebuild"
	"github.com/sparsesync/sparsesync/tcpsync"
)

func init() {
	replica.RebuildForTest = func(t *testing.T, source, target, remote string) (replica.RebuildResult, error) {
		var o *rebuild.Options
		if remote != "" {
			ctx, cancel := context.WithCancel(context.Background())
			srv := &tcpsync.Server{Root: filepath.Dir(remote), NoAuth: true}
			addr, wait, err := tcpsync.ServeLoopback(ctx, srv)
			require.NoError(t, err)
			t.Cleanup(func() { cancel(); require.NoError(t, wait()) })
			o = &rebuild.Options{Remote: addr, RemoteDir: filepath.Base(remote), TCP: tcpsync.Options{NoAuth: true, MaxAttempts: 1}}
		}
		st, err := rebuild.Rebuild(t.Context(), source, target, o)
		return replica.RebuildResult{Revision: st.Revision}, err
	}
}

// A replica directory can be pushed as one volume (tcpsync.Push): the
// format package does not import tcpsync, so the check lives here.
var _ tcpsync.Source = (*replica.ChainReader)(nil)

// A replica directory pushed as one volume is walked a window at a time.
var _ tcpsync.ExtentWalker = (*replica.ChainReader)(nil)
