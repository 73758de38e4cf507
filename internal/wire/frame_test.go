package wire

import (
	"bytes"
	"encoding/hex"
	"testing"

	"github.com/sparsesync/sparsesync/sparse"
	"github.com/stretchr/testify/require"
)

// TestKnownEncodings pins the bytes the protocol puts on the wire: a
// HELLO, both MACs' tags over two frames, a proof, a WINDOW body and the
// DATA codecs' output. The vectors were recorded from tcpsync before its
// wire layer moved into this package; a peer of any version since agrees
// on them byte for byte.
func TestKnownEncodings(t *testing.T) {
	h := HelloMsg{Version: Version, Features: 0x75}
	for i := range h.Nonce {
		h.Nonce[i] = byte(i)
	}
	require.Equal(t, "5453594e0275000000000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f", hex.EncodeToString(h.Marshal()))
	back, err := ParseHello(h.Marshal())
	require.NoError(t, err)
	require.Equal(t, h, back)

	hm := NewHMAC([]byte("k"))
	gm, err := NewGMAC(make([]byte, 32))
	require.NoError(t, err)
	var hdr [HeaderLen]byte
	PutHeader(&hdr, Data, FlagCodecLZ4, 3)
	require.Equal(t, []byte{8, 2, 0, 0, 3, 0, 0, 0}, hdr[:])
	want := []struct{ hmacH, hmacB, gmacH, gmacB string }{
		{"6c6c80433f2cda2c", "82369ad66071e3a56e0fb7ece260c3bb", "9903b17222cde890", "de7ae5cb6c2f51e03d8d73ba353dec11"},
		{"2ea7ef30ffd58c6b", "a81d21c65553d27a66bea47c0ea1ab7e", "ae52a7bf77c48738", "fd208b2ee9dd676deb6d7c4934e55694"},
	}
	for seq, w := range want {
		require.EqualValues(t, seq, hm.Seq())
		require.Equal(t, w.hmacH, hex.EncodeToString(hm.HeaderTag(hdr[:])))
		require.Equal(t, w.hmacB, hex.EncodeToString(hm.FrameTag(append(hdr[:], "abc"...))))
		require.Equal(t, w.gmacH, hex.EncodeToString(gm.HeaderTag(hdr[:])))
		require.Equal(t, w.gmacB, hex.EncodeToString(gm.FrameTag(append(hdr[:], "abc"...))))
	}
	require.Equal(t, "fbc55a0ffe83a7094124e92dfde06c2413810d1239a3b0b5c8fa4add80f436b8",
		hex.EncodeToString(Proof([]byte("tok"), "client", []byte("t"))))

	wf, err := WindowFrame(4096, 1<<20, []sparse.Extent{{Off: 8192, Len: 4096}, {Off: 65536, Len: 100}})
	require.NoError(t, err)
	require.Equal(t, "0010000000000000000010000000000001808040028040802080a00364", hex.EncodeToString(wf))
	require.Equal(t, len(wf)-16, WindowMapLen([]sparse.Extent{{Off: 8192, Len: 4096}, {Off: 65536, Len: 100}}, 1<<20))

	raw := bytes.Repeat([]byte("a"), 110)
	var e Encoder
	defer e.Close()
	var d Decoder
	defer d.Close()
	for _, tc := range []struct {
		codec, flag uint8
		out         string
	}{
		{0, 0, hex.EncodeToString(raw)},
		{FlagCodecLZ4, FlagCodecLZ4, "1f61010049000200d061616161616161616161616161"},
		{FlagCodecZstd, FlagCodecZstd, "28b52ffd000073030061"},
	} {
		out, fl := e.Compress(tc.codec, raw, make([]byte, 0, 1024))
		require.Equal(t, tc.flag, fl)
		require.Equal(t, tc.out, hex.EncodeToString(out))
		got, err := d.Decompress(fl, out, len(raw), make([]byte, MaxDataPayload))
		require.NoError(t, err)
		require.Equal(t, raw, got)
	}
	// Incompressible bytes go raw, whatever the codec asked for.
	noise := []byte("0123456789abcdefghijklmnopqrstuv")
	for _, c := range []uint8{FlagCodecLZ4, FlagCodecZstd} {
		out, fl := e.Compress(c, noise, make([]byte, 0, 1024))
		require.Zero(t, fl)
		require.Equal(t, noise, out)
	}
}

// TestHeaderRefuses: a header of an unknown type, with reserved bits set,
// or announcing more than its type's limit is refused, typed, before
// anything is allocated; at the limit it is taken.
func TestHeaderRefuses(t *testing.T) {
	var h [HeaderLen]byte
	for _, tc := range []struct {
		t    Type
		n    int
		want error
	}{
		{Data, MaxDataFrame, nil},
		{Data, MaxDataFrame + 1, ErrFrameTooLarge},
		{Window, MaxFrame, nil},
		{Window, MaxFrame + 1, ErrFrameTooLarge},
		{Hello, MaxDataFrame, ErrFrameTooLarge},
		{0, 1, ErrProtocol},
		{typeEnd, 1, ErrProtocol},
	} {
		PutHeader(&h, tc.t, 3, tc.n)
		got, flags, n, err := ParseHeader(h[:])
		if tc.want != nil {
			require.ErrorIs(t, err, tc.want, "%s of %d", tc.t, tc.n)
			continue
		}
		require.NoError(t, err)
		require.Equal(t, []any{tc.t, uint8(3), tc.n}, []any{got, flags, n})
	}
	PutHeader(&h, Data, 0, 1)
	h[3] = 1
	_, _, _, err := ParseHeader(h[:])
	require.ErrorIs(t, err, ErrProtocol, "reserved bits")
	require.Equal(t, "WINDOW", Window.String())
	require.Equal(t, "type(30)", Type(30).String())
}

// TestDec: fields decode in order, a short body or an over-long string
// sticks as ErrProtocol naming the frame, and End refuses trailing bytes.
func TestDec(t *testing.T) {
	b := []byte{7, 1, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0}
	b = AppendBytes(b, []byte("name"))
	d := Dec{B: b, T: Open}
	require.Equal(t, []any{uint8(7), uint32(1), uint64(2), []byte("name")}, []any{d.U8(), d.U32(), d.U64(), d.Bytes(4)})
	require.NoError(t, d.End())

	d = Dec{B: AppendBytes(nil, []byte("name")), T: Open}
	require.Nil(t, d.Bytes(3))
	require.ErrorIs(t, d.End(), ErrProtocol)
	d = Dec{B: []byte{1, 2, 3}, T: SrcInfo}
	require.Zero(t, d.U32())
	require.Zero(t, d.U8(), "a failure sticks")
	require.ErrorContains(t, d.End(), "SRCINFO body truncated")
	d = Dec{B: []byte{1, 2}, T: Zero}
	d.U8()
	require.ErrorContains(t, d.End(), "1 trailing bytes in ZERO")

	_, _, err := OffLen(Zero, 10, 0, 100)
	require.ErrorIs(t, err, ErrProtocol, "empty")
	_, _, err = OffLen(Zero, 10, ^uint64(0)-5, 100)
	require.ErrorIs(t, err, ErrProtocol, "overflowing")
	off, n, err := OffLen(Zero, 10, 90, 100)
	require.NoError(t, err)
	require.Equal(t, []int64{10, 90}, []int64{off, n})
}

// TestParseHelloRefuses: a HELLO of another length or magic is not ours
// (ErrProtocol), one of another version ErrVersion.
func TestParseHelloRefuses(t *testing.T) {
	ok := NewHello(FeatGMAC).Marshal()
	_, err := ParseHello(ok[:HelloLen-1])
	require.ErrorIs(t, err, ErrProtocol)
	bad := bytes.Clone(ok)
	bad[0] = 'X'
	_, err = ParseHello(bad)
	require.ErrorIs(t, err, ErrProtocol)
	bad = bytes.Clone(ok)
	bad[4] = Version + 1
	_, err = ParseHello(bad)
	require.ErrorIs(t, err, ErrVersion)
	require.NotEqual(t, NewHello(0).Nonce, NewHello(0).Nonce, "a fresh nonce each time")
}
