package localsync

import (
	"github.com/sparsesync/sparsesync/internal/target"
)

// SetFaults installs f (internal/target's fault injector) on the
// destination of copies made with o: for tests only.
func SetFaults(o *Options, f *target.Faults) { o.faults = f }
