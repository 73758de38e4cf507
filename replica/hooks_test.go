package replica

import (
	"os"
	"path/filepath"
)

// SetCounterMode switches r's counter mode (no I/O may be in flight) and
// reopens revision.counter as a replica opened in that mode has it: with
// O_DIRECT for the per-write counter, buffered otherwise.
func SetCounterMode(r *Replica, m CounterMode) {
	r.mode = m
	if r.rc == nil {
		return
	}
	r.rc.Close()
	f, _, err := openImage(filepath.Join(r.dir, RevisionCounterFile), os.O_RDWR, m == CounterPerWrite && !r.opts.BufferedIO)
	if err != nil {
		panic(err) // test hook: the file was open a moment ago
	}
	r.rc = f
}
