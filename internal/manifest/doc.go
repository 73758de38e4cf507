// Package manifest is the one home of a destination's stored digests: a
// keyed digest of each 64 KiB block a local re-sync compared (of the part
// of it a compared data extent covered, where an extent starts or ends
// inside the block), kept in a
// sidecar file next to the destination ("DST.sparsesync") and named by the
// destination's quick-check mark (internal/syncmark, Mark.Digests). A later
// re-sync of a changed source into the unchanged destination then reads
// only the source: a block whose digest equals the stored one is the
// destination's already, and only the blocks that differ, or that the
// manifest does not cover, are read from the destination and compared
// byte for byte.
//
// # What a manifest proves
//
// A manifest describes the destination exactly when its mark does: the
// mark is written after the manifest, once the destination is durable and
// the filesystem clock is past its last change, and names the manifest's
// random ID. Any later change of the destination's bytes or size moves its
// mtime and voids the mark, and with it the manifest (syncmark's package
// documentation says what a mark proves and what it cannot see).
//
// # Why a keyed digest
//
// Whoever writes the source (a VM's guest writes its own disk image)
// chooses both the old block and the new one. An unkeyed fast hash such as
// xxhash can be made to collide, and a collision would leave the old block
// in the destination while the sync reports it exact. A digest is the
// 128-bit AES-256-GMAC tag of the block under a random key kept only in the
// sidecar (mode 0600, owned by the user who syncs), with the range's
// offset and length as the nonce: GHASH is a universal hash, so without the key the chance
// that two different 64 KiB blocks share a tag is at most 2^-116. GMAC
// tags about 7 GB/s with AES-NI and carry-less multiplication, 4x
// HMAC-SHA256 with SHA-NI (measured on the project's VM).
//
// # Size
//
// 28 bytes per 64 KiB block of compared data (3.5 MiB for 8 GiB), and one
// more range per edge of a data extent inside a block. A sync that would
// record more than MaxEntries ranges (256 GiB of data in whole blocks)
// keeps none.
package manifest
