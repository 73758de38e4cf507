package tcpsync

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"encoding/binary"
	"fmt"
	"time"
)

const (
	protoVersion = 2 // 2: frames after the handshake carry tags (mac.go)
	helloLen     = 4 + 1 + 4 + 32
	// MinTokenLen is the least number of bytes a token must have.
	MinTokenLen = 32
	// featNoAuth, set by a server, says it authenticates nobody (loopback only).
	featNoAuth = 1 << 0
	// featKeepalive says the peer understands PROGRESS frames, which a
	// receiver sends while it reads its target back (both sides set it).
	featKeepalive = 1 << 1
	// featWorked says the peer understands PROGRESS frames with
	// flagWorked, which a receiver holding to a bandwidth budget sends
	// while it works at the budget's pace (both sides set it).
	featWorked = 1 << 2
	// featWideMaps says the peer takes extent maps of more than
	// maxExtents entries, bounded only by its session memory budget
	// (both sides set it). Without it a map carries at most maxExtents.
	featWideMaps = 1 << 4
	// featWindows says the peer walks the file in windows of the two maps
	// (WINDOW frames, window.go) instead of sending whole maps (both
	// sides set it): a session's memory no longer grows with the extent
	// count.
	featWindows = 1 << 5
	// featGMAC says the peer tags frames with AES-GMAC (mac.go); when
	// both sides set it they do, else with HMAC-SHA256.
	featGMAC = 1 << 6
	// featBusy says the peer takes PROGRESS frames with flagBusy, which
	// either side sends while it is in a long phase that counts no byte
	// (busy.go); both sides set it.
	featBusy = 1 << 7
)

// ourFeatures is what our HELLO announces: everything, less wide maps
// when f plays an older peer (tests).
func ourFeatures(f *framer, noAuth bool) uint32 {
	feat := uint32(featKeepalive | featWorked | featWideMaps | featWindows | featGMAC | featBusy)
	if f.narrowMaps {
		feat &^= featWideMaps | featWindows
	}
	if f.noWindows {
		feat &^= featWindows
	}
	if f.hmacOnly {
		feat &^= featGMAC
	}
	if f.notBusy {
		feat &^= featBusy
	}
	if noAuth {
		feat |= featNoAuth
	}
	return feat
}

var magic = [4]byte{'T', 'S', 'Y', 'N'}

type hello struct {
	version  uint8
	features uint32
	nonce    [32]byte
}

func (h hello) marshal() []byte {
	b := append([]byte(nil), magic[:]...)
	b = append(b, h.version)
	b = binary.LittleEndian.AppendUint32(b, h.features)
	return append(b, h.nonce[:]...)
}

func parseHello(b []byte) (hello, error) {
	var h hello
	if len(b) != helloLen || !bytes.Equal(b[:4], magic[:]) {
		return h, fmt.Errorf("%w: not a tcpsync peer (bad HELLO)", ErrProtocol)
	}
	h.version = b[4]
	h.features = binary.LittleEndian.Uint32(b[5:])
	copy(h.nonce[:], b[9:])
	if h.version != protoVersion {
		return h, fmt.Errorf("%w: peer speaks version %d, we speak %d", ErrVersion, h.version, protoVersion)
	}
	return h, nil
}

func newHello(features uint32) hello {
	h := hello{version: protoVersion, features: features}
	_, _ = rand.Read(h.nonce[:])
	return h
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

func proof(token []byte, label string, t []byte) []byte {
	m := hmac.New(sha256.New, token)
	m.Write([]byte("tcpsync/1 " + label))
	m.Write(t)
	return m.Sum(nil)
}

// sessionSeed derives the per-session block-hash seed: secret to anyone
// without the token (and unpredictable to both peers before the nonces).
func sessionSeed(token, t []byte) uint64 {
	return binary.LittleEndian.Uint64(proof(token, "seed", t))
}

// clientHandshake runs the client side: HELLO both ways, then mutual HMAC
// proofs unless both sides run without authentication. It returns the
// session seed.
func clientHandshake(ctx context.Context, f *framer, token []byte, noAuth bool) (uint64, error) {
	ch := newHello(ourFeatures(f, noAuth)).marshal()
	if err := f.send(fHello, 0, ch); err != nil {
		return 0, err
	}
	_, sb, err := f.expect(fHello)
	if err != nil {
		return 0, err
	}
	sh := bytes.Clone(sb)
	srv, err := parseHello(sh)
	if err != nil {
		return 0, err
	}
	f.keepalive = srv.features&featKeepalive != 0
	f.worked = srv.features&featWorked != 0
	f.wideMaps = srv.features&featWideMaps != 0 && !f.narrowMaps
	f.gmac = srv.features&featGMAC != 0 && !f.hmacOnly
	f.busy = srv.features&featBusy != 0 && !f.notBusy
	f.windows = srv.features&featWindows != 0 && !f.narrowMaps && !f.noWindows
	t := transcript(f, ch, sh)
	if srv.features&featNoAuth != 0 {
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
	if err := f.send(fAuth, 0, proof(token, "client", t)); err != nil {
		return 0, err
	}
	_, sp, err := f.expect(fAuth)
	if err != nil {
		return 0, err
	}
	if !hmac.Equal(sp, proof(token, "server", t)) {
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
	_, cb, err := f.expect(fHello)
	if err != nil {
		return 0, err
	}
	ch := bytes.Clone(cb)
	cli, err := parseHello(ch)
	if err != nil {
		return 0, err
	}
	f.keepalive = cli.features&featKeepalive != 0
	f.worked = cli.features&featWorked != 0
	f.wideMaps = cli.features&featWideMaps != 0 && !f.narrowMaps
	f.gmac = cli.features&featGMAC != 0 && !f.hmacOnly
	f.busy = cli.features&featBusy != 0 && !f.notBusy
	f.windows = cli.features&featWindows != 0 && !f.narrowMaps && !f.noWindows
	sh := newHello(ourFeatures(f, noAuth)).marshal()
	if err := f.send(fHello, 0, sh); err != nil {
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
	case got == fError:
		return 0, decodeError(cp)
	case got != fAuth:
		return 0, fmt.Errorf("%w: %w: got %s, want %s", ErrUnauthorized, ErrProtocol, got, fAuth)
	}
	if !hmac.Equal(cp, proof(token, "client", t)) {
		tm := time.NewTimer(failDelay)
		select {
		case <-tm.C:
		case <-ctx.Done():
			tm.Stop()
		}
		return 0, fmt.Errorf("%w: wrong client proof", ErrUnauthorized)
	}
	if err := f.send(fAuth, 0, proof(token, "server", t)); err != nil {
		return 0, err
	}
	if err := f.authenticate(token, t, false); err != nil {
		return 0, err
	}
	return sessionSeed(token, t), nil
}
