package tcpsync

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sparsesync/sparsesync/internal/layout"
)

func TestPushPullSmoke(t *testing.T) {
	root := t.TempDir()
	local := t.TempDir()
	addr, _ := startServer(t, root, nil)
	l := layout.Layout{Name: "x", Size: 10_000_001, Data: layout.Ranges(1000, 4000, 1_000_003, 499_998, 9_999_000, 1001)}
	src := writeLayout(t, local, "src", l)
	st, err := PushFile(t.Context(), addr, src, "img", clientOpts())
	require.NoError(t, err)
	require.True(t, st.Verified)
	requireSame(t, src, filepath.Join(root, "img"))
	t.Logf("%+v", st)

	mutate(t, src, 5, 1)
	st, err = PushFile(t.Context(), addr, src, "img", clientOpts())
	require.NoError(t, err)
	requireSame(t, src, filepath.Join(root, "img"))
	t.Logf("%+v", st)

	st, err = PushFile(t.Context(), addr, src, "img", clientOpts())
	require.NoError(t, err)
	require.True(t, st.QuickCheck)
	t.Logf("%+v", st)

	dst := filepath.Join(local, "pulled")
	st, err = Pull(t.Context(), addr, "img", dst, clientOpts())
	require.NoError(t, err)
	requireSame(t, src, dst)
	t.Logf("%+v", st)
	_, err = os.Stat(dst + ".tcpsync")
	require.NoError(t, err)
}
