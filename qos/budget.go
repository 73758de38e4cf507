package qos

import "time"

// Budget is what a sync may use of a node: each field bounds one direction
// on its own, and a nil field is unlimited. The zero Budget limits nothing.
// The same Budget (or Budgets whose fields share Limiters) may be given to
// several syncs at once: they then share its rates.
type Budget struct {
	Read  *Limiter // bytes read from storage: the source, and a re-sync's reads of the destination
	Write *Limiter // bytes written to storage
	Wire  *Limiter // bytes sent or received on the network
}

// NewBudget returns a Budget whose three directions are each limited to
// bytesPerSecond on their own (0: unlimited).
func NewBudget(bytesPerSecond int64) Budget {
	return Budget{Read: NewLimiter(bytesPerSecond), Write: NewLimiter(bytesPerSecond), Wire: NewLimiter(bytesPerSecond)}
}

// Child returns a Budget of bytesPerSecond per direction inside b: a sync
// given the child is held to both (a session's own limit within a server's
// node-wide budget, which its sessions share).
func (b Budget) Child(bytesPerSecond int64) Budget {
	return Budget{Read: b.Read.Child(bytesPerSecond), Write: b.Write.Child(bytesPerSecond), Wire: b.Wire.Child(bytesPerSecond)}
}

// SetRate sets every direction's rate (0: unlimited).
func (b Budget) SetRate(bytesPerSecond int64) {
	b.Read.SetRate(bytesPerSecond)
	b.Write.SetRate(bytesPerSecond)
	b.Wire.SetRate(bytesPerSecond)
}

// Limited says whether any direction has a limit now.
func (b Budget) Limited() bool {
	return b.Read.Piece() > 0 || b.Write.Piece() > 0 || b.Wire.Piece() > 0
}

// Waited is the time spent waiting, summed over the three directions.
func (b Budget) Waited() time.Duration {
	return b.Read.Waited() + b.Write.Waited() + b.Wire.Waited()
}
