package main

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sparsesync/sparsesync/tcpsync"
)

// startServe runs `sparsesync serve` in-process and returns its addresses.
func startServe(t *testing.T, opts serveOptions) (addr, metrics string) {
	t.Helper()
	ready := make(chan [2]string, 1)
	opts.ready = func(a, m string) { ready <- [2]string{a, m} }
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	g, _ := testGlobals()
	go func() { done <- runServe(ctx, g, opts) }()
	t.Cleanup(func() {
		cancel()
		require.ErrorIs(t, <-done, context.Canceled) // stopped by the signal: exit 130
	})
	select {
	case a := <-ready:
		return a[0], a[1]
	case err := <-done:
		t.Fatalf("serve: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("serve did not start")
	}
	return "", ""
}

func writeToken(t *testing.T, dir string) string {
	p := filepath.Join(dir, "token")
	require.NoError(t, os.WriteFile(p, []byte(tcpsync.NewToken()+"\n"), 0o600))
	return p
}

func sparseFile(t *testing.T, path string, size int64, data map[int64]string) {
	f, err := os.Create(path)
	require.NoError(t, err)
	defer f.Close()
	require.NoError(t, f.Truncate(size))
	for off, s := range data {
		_, err := f.WriteAt(bytes.Repeat([]byte(s), 4096), off)
		require.NoError(t, err)
	}
}

func TestPushPullCommands(t *testing.T) {
	dir := t.TempDir()
	root := filepath.Join(dir, "root")
	require.NoError(t, os.Mkdir(root, 0o755))
	tok := writeToken(t, dir)
	addr, metrics := startServe(t, serveOptions{root: root, listen: "127.0.0.1:0", tokenFile: tok, metrics: "127.0.0.1:0"})

	src := filepath.Join(dir, "src.img")
	sparseFile(t, src, 64<<20, map[int64]string{0: "a", 32 << 20: "b"})
	g, out := testGlobals()
	opts := netOptions{tokenFile: tok, compress: "auto", blockSize: 4096, retries: 0, json: true}
	require.NoError(t, runPush(t.Context(), g, opts, src, addr, "dst.img"))
	var res syncResult
	require.NoError(t, json.Unmarshal(out.Bytes(), &res))
	require.True(t, res.Verified)
	require.Equal(t, int64(64<<20), res.Size)
	require.Equal(t, int64(2*4096), res.CopiedBytes)
	require.Equal(t, "tcp://"+addr+"/dst.img", res.Dst)
	a, err := os.ReadFile(src)
	require.NoError(t, err)
	b, err := os.ReadFile(filepath.Join(root, "dst.img"))
	require.NoError(t, err)
	require.True(t, bytes.Equal(a, b))

	pulled := filepath.Join(dir, "pulled.img")
	g, out = testGlobals()
	opts.json = false
	require.NoError(t, runPull(t.Context(), g, opts, addr, "dst.img", pulled))
	require.Contains(t, out.String(), "verified")
	c, err := os.ReadFile(pulled)
	require.NoError(t, err)
	require.True(t, bytes.Equal(a, c))

	fams := scrapeMetrics(t, metrics)
	require.Equal(t, 1.0, counterValue(t, fams, "sparsesync_syncs_total", map[string]string{"op": "push", "result": "ok"}))
	require.Equal(t, 1.0, counterValue(t, fams, "sparsesync_syncs_total", map[string]string{"op": "pull", "result": "ok"}))
	require.Equal(t, 16384.0, counterValue(t, fams, "sparsesync_bytes_total", map[string]string{"kind": "copied"}))
	resp, err := http.Get("http://" + metrics + "/debug/pprof/")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusNotFound, resp.StatusCode, "no profiles without --pprof")

	// A wrong token fails with exit status 1 and a one-line error.
	other := writeToken(t, t.TempDir())
	opts.tokenFile = other
	err = runPush(t.Context(), g, opts, src, addr, "x.img")
	require.ErrorIs(t, err, tcpsync.ErrUnauthorized)
	require.Equal(t, 1, exitCode(t.Context(), err))
	require.NotContains(t, errorLine(err), "\n")
	_, err = os.Stat(filepath.Join(root, "x.img"))
	require.ErrorIs(t, err, os.ErrNotExist)

	// Usage errors exit with 2.
	opts.tokenFile = ""
	err = runPush(t.Context(), g, opts, src, addr, "x.img")
	require.Equal(t, 2, exitCode(t.Context(), err))
	require.NoError(t, os.Chmod(tok, 0o644))
	opts.tokenFile = tok
	err = runPush(t.Context(), g, opts, src, addr, "x.img")
	require.ErrorIs(t, err, tcpsync.ErrTokenFile)
}

func TestServeTLSPinned(t *testing.T) {
	dir := t.TempDir()
	root := filepath.Join(dir, "root")
	require.NoError(t, os.Mkdir(root, 0o755))
	certFile, keyFile, pin := selfSigned(t, dir)
	tok := writeToken(t, dir)
	addr, _ := startServe(t, serveOptions{root: root, listen: "127.0.0.1:0", tokenFile: tok, tlsCert: certFile, tlsKey: keyFile})
	src := filepath.Join(dir, "src.img")
	sparseFile(t, src, 8<<20, map[int64]string{4 << 20: "z"})
	g, _ := testGlobals()
	opts := netOptions{tokenFile: tok, compress: "zstd", blockSize: 4096, tlsPin: pin}
	require.NoError(t, runPush(t.Context(), g, opts, src, addr, "dst.img"))
	opts.tlsPin = hex.EncodeToString(make([]byte, 32))
	err := runPush(t.Context(), g, opts, src, addr, "dst2.img")
	require.ErrorContains(t, err, "does not match the pin")
	opts.tlsPin = ""
	opts.tlsCA = certFile // self-signed: its own CA
	require.NoError(t, runPush(t.Context(), g, opts, src, addr, "dst3.img"))
	opts.tlsCA = ""
	err = runPush(t.Context(), g, opts, src, addr, "dst4.img") // plain client, TLS server
	require.Error(t, err)
}

func selfSigned(t *testing.T, dir string) (certFile, keyFile, pin string) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	kb, err := x509.MarshalECPrivateKey(key)
	require.NoError(t, err)
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	require.NoError(t, os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600))
	require.NoError(t, os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600))
	sum := sha256.Sum256(der)
	return certFile, keyFile, hex.EncodeToString(sum[:])
}

// TestReadBackFlag: --read-back on reads an in-place push's target back
// (the JSON says so), the default does not, a pull with --atomic does by
// default and --read-back off turns that off; a bad value is a usage error.
func TestReadBackFlag(t *testing.T) {
	dir := t.TempDir()
	root := filepath.Join(dir, "root")
	require.NoError(t, os.Mkdir(root, 0o755))
	tok := writeToken(t, dir)
	addr, _ := startServe(t, serveOptions{root: root, listen: "127.0.0.1:0", tokenFile: tok})
	src := filepath.Join(dir, "src.img")
	sparseFile(t, src, 16<<20, map[int64]string{0: "a", 8 << 20: "b"})
	for _, c := range []struct {
		pull     bool
		atomic   bool
		readBack string
		want     bool
	}{
		{false, false, "", false}, {false, false, "on", true}, {false, true, "auto", true},
		{true, true, "", true}, {true, true, "off", false}, {true, false, "ON", true},
	} {
		g, out := testGlobals()
		opts := netOptions{tokenFile: tok, compress: "auto", blockSize: 4096, json: true,
			atomic: c.atomic, readBack: c.readBack, fullCompare: true}
		var err error
		if c.pull {
			err = runPull(t.Context(), g, opts, addr, "dst.img", filepath.Join(dir, "pulled.img"))
		} else {
			err = runPush(t.Context(), g, opts, src, addr, "dst.img")
		}
		require.NoError(t, err, "%+v", c)
		var res syncResult
		require.NoError(t, json.Unmarshal(out.Bytes(), &res))
		require.True(t, res.Verified)
		require.Equal(t, c.want, res.ReadBack, "%+v", c)
	}
	g, _ := testGlobals()
	err := runPush(t.Context(), g, netOptions{tokenFile: tok, compress: "auto", blockSize: 4096, readBack: "always"}, src, addr, "x.img")
	require.Equal(t, 2, exitCode(t.Context(), err))
	require.ErrorContains(t, err, "read-back")
}
