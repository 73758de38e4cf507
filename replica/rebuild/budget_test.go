package rebuild

import (
	"github.com/sparsesync/sparsesync/replica"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sparsesync/sparsesync/qos"
	"github.com/sparsesync/sparsesync/tcpsync"
)

// TestRebuildChargesItsBudget checks that a local rebuild asks its budget
// for what it moves: every byte the copy writes, and for reads the copy's
// and the verification's (which reads both files). The rate is qos's to
// hold; here it is too high to wait.
func TestRebuildChargesItsBudget(t *testing.T) {
	root := t.TempDir()
	src, dst := filepath.Join(root, "src"), filepath.Join(root, "dst")
	makeSource(t, src, 32<<20, 2<<20)
	b := qos.NewBudget(8 << 30)
	st, err := Rebuild(t.Context(), src, dst, &Options{Budget: b})
	require.NoError(t, err)
	require.Equal(t, exportBytes(t, src), exportBytes(t, dst))
	var copied, cloned int64
	for _, f := range st.Files {
		copied += f.CopiedBytes
		cloned += f.ClonedBytes
	}
	require.Equal(t, copied, b.Write.Bytes(), "every byte written is charged: %+v", st.Files)
	if cloned == 0 {
		require.Positive(t, copied)
		require.GreaterOrEqual(t, b.Read.Bytes(), 3*copied, "the copy reads the data once, the verification twice")
	}
}

// TestExportChargesItsBudget checks that Export asks its budget for every
// byte it reads from the chain and writes to the image: the volume's data,
// once each way.
func TestExportChargesItsBudget(t *testing.T) {
	root := t.TempDir()
	src := filepath.Join(root, "src")
	makeSource(t, src, 32<<20, 2<<20)
	b := qos.NewBudget(8 << 30)
	out := filepath.Join(root, "out.img")
	st, err := replica.Export(t.Context(), src, out, &replica.ExportOptions{Budget: b})
	require.NoError(t, err)
	require.Positive(t, st.DataBytes)
	require.Equal(t, st.DataBytes, b.Read.Bytes(), "bytes read from the chain, as charged")
	require.Equal(t, st.DataBytes, b.Write.Bytes(), "bytes written to the image, as charged")
	plain := filepath.Join(root, "plain.img")
	_, err = replica.Export(t.Context(), src, plain, nil)
	require.NoError(t, err)
	want, err := os.ReadFile(plain)
	require.NoError(t, err)
	got, err := os.ReadFile(out)
	require.NoError(t, err)
	require.Equal(t, want, got, "a budget changes the pace, not the image")
}

// TestRebuildOverTCPChargesItsBudget checks that Options.Budget
// reaches the network copy: the pulled files' writes, their read-back and
// the wire bytes are charged to it.
func TestRebuildOverTCPChargesItsBudget(t *testing.T) {
	root := t.TempDir()
	src, dst := filepath.Join(root, "src"), filepath.Join(root, "dst")
	makeSource(t, src, 32<<20, 2<<20)
	b := qos.NewBudget(8 << 30)
	st, err := Rebuild(t.Context(), "", dst, &Options{Remote: serveDir(t, src), RemoteDir: "src",
		TCP: tcpsync.Options{NoAuth: true, MaxAttempts: 1}, Budget: b})
	require.NoError(t, err)
	require.Equal(t, PathTCP, st.Path)
	require.Equal(t, exportBytes(t, src), exportBytes(t, dst))
	var copied int64
	for _, f := range st.Files {
		copied += f.CopiedBytes
	}
	require.Positive(t, copied)
	require.GreaterOrEqual(t, b.Write.Bytes(), copied, "every byte pulled is written, as charged (the metadata too)")
	require.GreaterOrEqual(t, b.Read.Bytes(), copied, "the read-back reads what was written")
	require.Greater(t, b.Wire.Bytes(), copied, "the data and the protocol crossed the wire")
}
