package tcpsync

import (
	"flag"
	"os"
	"strconv"
	"testing"
)

// waitingParallel is how many of the package's parallel tests run at once
// unless -parallel says otherwise. Only tests that wait call t.Parallel
// here: on storage slowed by a fault's delay, on a rate limit or on an
// idle timeout, not on the CPU. Under go test's default (GOMAXPROCS, two
// on a 2-core machine) they queued two at a time and held the end of the
// package's run for 40 s.
const waitingParallel = 8

func TestMain(m *testing.M) {
	flag.Parse()
	explicit := false
	flag.Visit(func(f *flag.Flag) { explicit = explicit || f.Name == "test.parallel" })
	if !explicit {
		if err := flag.Set("test.parallel", strconv.Itoa(waitingParallel)); err != nil {
			panic(err)
		}
	}
	os.Exit(m.Run())
}
