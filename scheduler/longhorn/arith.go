package longhorn

import "math/bits"

// Longhorn's capacity formulas divide by 100 (or by the disk maximum) and
// then compare integers. For an integer x and y ≥ 0, floor(y/k) ≥ x ⟺ y ≥ k·x
// and floor(y/k) < x ⟺ y < k·x, so every formula is evaluated exactly as
// products compared in 128 bits: no rounding, no overflow, whatever sizes
// the state holds.

type u128 struct{ hi, lo uint64 }

// mul returns a·b for non-negative a and b.
func mul(a, b int64) u128 {
	hi, lo := bits.Mul64(uint64(a), uint64(b))
	return u128{hi, lo}
}

// sum3 returns a+b+c for non-negative a, b, c.
func sum3(a, b, c int64) u128 {
	lo, carry := bits.Add64(uint64(a), uint64(b), 0)
	lo, carry2 := bits.Add64(lo, uint64(c), 0)
	return u128{carry + carry2, lo}
}

// mulU returns x·k for a small k.
func (x u128) mulU(k uint64) u128 {
	hi1, lo := bits.Mul64(x.lo, k)
	return u128{x.hi*k + hi1, lo}
}

func (x u128) less(y u128) bool {
	return x.hi < y.hi || (x.hi == y.hi && x.lo < y.lo)
}
