package tcpsync

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/tls"
	"encoding/binary"
	"fmt"
	"time"

	"github.com/sparsesync/sparsesync/internal/wire"
)

// MinTokenLen is the least number of bytes a token must have.
const MinTokenLen = 32

// agree takes what the peer's HELLO announced: a feature is on when both
// sides announce it (ourFeatures leaves out what this side plays without).
func (f *framer) agree(peer uint32) {
	f.keepalive = peer&wire.FeatKeepalive != 0
	f.worked = peer&wire.FeatWorked != 0
	f.wideMaps = peer&wire.FeatWideMaps != 0 && !f.narrowMaps
	f.gmac = peer&wire.FeatGMAC != 0 && !f.hmacOnly
	f.busy = peer&wire.FeatBusy != 0 && !f.notBusy
	f.windows = peer&wire.FeatWindows != 0 && !f.narrowMaps && !f.noWindows
	f.pieceMaps = peer&wire.FeatPieceMaps != 0 && !f.narrowMaps && !f.noWindows
	f.batch = peer&wire.FeatBatch != 0 && !f.noBatch
}

// ourFeatures is what our HELLO announces: everything, less wide maps
// when f plays an older peer (tests).
func ourFeatures(f *framer, noAuth bool) uint32 {
	feat := uint32(wire.FeatKeepalive | wire.FeatWorked | wire.FeatWideMaps | wire.FeatWindows | wire.FeatGMAC | wire.FeatBusy | wire.FeatPieceMaps | wire.FeatBatch)
	if f.narrowMaps {
		feat &^= wire.FeatWideMaps | wire.FeatWindows | wire.FeatPieceMaps
	}
	if f.noWindows {
		feat &^= wire.FeatWindows | wire.FeatPieceMaps
	}
	if f.hmacOnly {
		feat &^= wire.FeatGMAC
	}
	if f.notBusy {
		feat &^= wire.FeatBusy
	}
	if f.noBatch {
		feat &^= wire.FeatBatch
	}
	if noAuth {
		feat |= wire.FeatNoAuth
	}
	return feat
}

// transcript is T = SHA-256(client HELLO ‖ server HELLO ‖ TLS exporter).
func transcript(f *framer, ch, sh []byte) []byte {
	t := sha256.New()
	t.Write(ch)
	t.Write(sh)
	if tc, ok := f.c.(*tls.Conn); ok {
		cs := tc.ConnectionState()
		if ekm, err := cs.ExportKeyingMaterial("EXPORTER-tcpsync", nil, 32); err == nil {
			t.Write(ekm)
		}
	}
	return t.Sum(nil)
}

// sessionSeed derives the per-session block-hash seed: secret to anyone
// without the token (and unpredictable to both peers before the nonces).
func sessionSeed(token, t []byte) uint64 {
	return binary.LittleEndian.Uint64(wire.Proof(token, "seed", t))
}

// readHello reads the peer's HELLO and agrees on the features both sides
// have; raw is the message as received (a copy), for the transcript.
func readHello(f *framer) (raw []byte, h wire.HelloMsg, err error) {
	_, b, err := f.expect(wire.Hello)
	if err != nil {
		return nil, h, err
	}
	raw = bytes.Clone(b)
	if h, err = wire.ParseHello(raw); err != nil {
		return nil, h, err
	}
	f.agree(h.Features)
	return raw, h, nil
}

// clientHandshake runs the client side: HELLO both ways, then mutual HMAC
// proofs unless both sides run without authentication. It returns the
// session seed.
func clientHandshake(ctx context.Context, f *framer, token []byte, noAuth bool) (uint64, error) {
	ch := wire.NewHello(ourFeatures(f, noAuth)).Marshal()
	if err := f.send(wire.Hello, 0, ch); err != nil {
		return 0, err
	}
	sh, srv, err := readHello(f)
	if err != nil {
		return 0, err
	}
	t := transcript(f, ch, sh)
	if srv.Features&wire.FeatNoAuth != 0 {
		if !noAuth {
			return 0, fmt.Errorf("%w: the server does not authenticate itself (it runs with --no-auth) but we have a token", ErrUnauthorized)
		}
		if err := f.authenticate(nil, t, true); err != nil {
			return 0, err
		}
		return sessionSeed(nil, t), nil
	}
	if noAuth {
		return 0, fmt.Errorf("%w: the server requires a token", ErrUnauthorized)
	}
	if err := f.send(wire.Auth, 0, wire.Proof(token, "client", t)); err != nil {
		return 0, err
	}
	_, sp, err := f.expect(wire.Auth)
	if err != nil {
		return 0, err
	}
	if !hmac.Equal(sp, wire.Proof(token, "server", t)) {
		return 0, fmt.Errorf("%w: the server could not prove it holds the token", ErrUnauthorized)
	}
	if err := f.authenticate(token, t, true); err != nil {
		return 0, err
	}
	return sessionSeed(token, t), nil
}

// serverHandshake runs the server side. On a wrong proof it waits failDelay
// (bounded by ctx) before returning, to slow guessing.
func serverHandshake(ctx context.Context, f *framer, token []byte, noAuth bool, failDelay time.Duration) (uint64, error) {
	ch, _, err := readHello(f)
	if err != nil {
		return 0, err
	}
	sh := wire.NewHello(ourFeatures(f, noAuth)).Marshal()
	if err := f.send(wire.Hello, 0, sh); err != nil {
		return 0, err
	}
	t := transcript(f, ch, sh)
	if noAuth {
		if err := f.authenticate(nil, t, false); err != nil {
			return 0, err
		}
		return sessionSeed(nil, t), nil
	}
	// Not f.expect: a frame other than AUTH (or ERROR) is a failed login
	// as well as a protocol violation, and only the type says which.
	got, _, cp, err := f.readFrame()
	switch {
	case err != nil:
		return 0, err
	case got == wire.Error:
		return 0, decodeError(cp)
	case got != wire.Auth:
		return 0, fmt.Errorf("%w: %w: got %s, want %s", ErrUnauthorized, ErrProtocol, got, wire.Auth)
	}
	if !hmac.Equal(cp, wire.Proof(token, "client", t)) {
		tm := time.NewTimer(failDelay)
		select {
		case <-tm.C:
		case <-ctx.Done():
			tm.Stop()
		}
		return 0, fmt.Errorf("%w: wrong client proof", ErrUnauthorized)
	}
	if err := f.send(wire.Auth, 0, wire.Proof(token, "server", t)); err != nil {
		return 0, err
	}
	if err := f.authenticate(token, t, false); err != nil {
		return 0, err
	}
	return sessionSeed(token, t), nil
}
