// Package destplan decides how a destination becomes a copy of a source,
// bytes and holes: which ranges to copy, which to compare, which to punch,
// and how to resize. It is the one home of that rule for localsync and
// tcpsync (both sides of a tcpsync session derive the same plan from the
// two maps). Pure: no I/O, no ctx; the callers walk the files.
//
// # Inputs
//
// Src is the source's data map, its size the source's. Dst is the
// destination's data map as walked, at the destination's size when it was
// walked (localsync walks after resizing; tcpsync before, because its map
// crosses the wire first). Hidden is the destination's hidden allocation:
// blocks allocated although the walk called them holes (they read as
// zeros). Keep is where the source has hidden allocation of its own: the
// destination's is kept there. Unit is the compare unit, a power of two: 1
// compares exact bytes (localsync reads both sides), tcpsync's block size
// compares whole blocks (it hashes them). A destination whose holes are
// unknown (a block device) is all data.
//
// # The rule
//
//	S, D := size(Src), size(Dst)
//	dst  := DstHolesUnknown ? [0, D) : Dst
//	held := dst                                     # what the destination may hold
//	if D < S and D % 4 KiB != 0:                    # growing from an unaligned size:
//	    held += [floor(D, 4 KiB), +4 KiB)            # its last page is allocated (btrfs
//	                                                 # writes zeros there, ext4 keeps the block)
//	held  = held cut at S
//	Data    = Src rounded out to Unit                # units holding source data
//	limit  := min(S, D)
//	if D != S: limit = floor(limit, Unit)           # a unit compares only at the same length
//	Compare = Data ∩ (dst cut at S, rounded out to Unit, cut at limit)
//	Copy    = Src \ Compare                          # written without reading the destination
//	Punch   = (held ∪ (Hidden cut at S \ Keep)) ∩ holes(Src)   # exact, not per unit
//	Resize  = D != S (to S)
//
// Every byte of the source's data is either copied or compared (Copy ∪
// Compare ⊇ Src); within a compared unit only the source's data is written
// where it differs, and the parts of the unit in the source's holes are
// punched before the comparison. Every destination byte that may hold
// something where the source has a hole is punched. Hidden allocation does
// not change what is copied or compared, only what is punched, so a tcpsync
// receiver (which knows it) and its sender (which does not) agree on Data
// and Compare.
package destplan
