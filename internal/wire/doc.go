// Package wire is tcpsync's protocol on the wire, apart from the sessions
// that speak it (as syncthing keeps lib/protocol apart from lib/model):
// the frame types and their size limits, the header, the bounds-checked
// body decoder, the HELLO and its feature bits, the WINDOW body, the DATA
// codecs, the frame tags (HMAC-SHA256 or AES-GMAC) and the numeric error
// codes of ERROR frames. It knows nothing of files, sessions or budgets,
// and reads no connection: tcpsync's framer does, with these.
//
// # Frames
//
//	header (8)  type u8 | flags u8 | reserved u16 (zero) | length u32 (little-endian)
//	body        at most Type.Limit() bytes, checked before anything is allocated
//
// After the handshake every frame carries a header tag after its header
// and a body tag after its body (mac.go).
//
// Every function is pure and safe for concurrent use; Encoder, Decoder
// and MAC hold state and serve one goroutine each.
package wire
