package tcpsync

import "testing"

// BenchmarkFrameMAC is the per-byte cost of tagging a full DATA frame
// (what authentication adds to each side of a transfer).
func BenchmarkFrameMAC(b *testing.B) {
	m := newMacer(testToken)
	hdr := make([]byte, headerLen)
	body := make([]byte, maxDataPayload)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		m.headerTag(hdr)
		m.bodyTag(hdr, body)
	}
}
