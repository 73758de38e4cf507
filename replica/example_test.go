package replica_test

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/sparsesync/sparsesync/replica"
)

// A volume of three replicas; one of them misses a write (here: the other
// two are written directly), and the start check finds it.
func ExampleCheck() {
	root, err := os.MkdirTemp("", "replica-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(root)
	dirs := []string{filepath.Join(root, "r0"), filepath.Join(root, "r1"), filepath.Join(root, "r2")}

	v, err := replica.CreateVolume(dirs, 1<<20, replica.VolumeOptions{Counter: replica.CounterOn})
	if err != nil {
		panic(err)
	}
	if _, err := v.WriteAt([]byte("hello"), 0); err != nil {
		panic(err)
	}
	if err := v.Close(); err != nil {
		panic(err)
	}
	for _, d := range dirs[:2] {
		r, err := replica.Open(d, replica.Options{})
		if err != nil {
			panic(err)
		}
		if _, err := r.WriteAt([]byte("world"), 4096); err != nil {
			panic(err)
		}
		if err := r.Close(); err != nil {
			panic(err)
		}
	}

	rep, err := replica.Check(dirs, replica.CheckOptions{})
	if err != nil {
		panic(err)
	}
	for _, r := range rep.Replicas {
		fmt.Println(filepath.Base(r.Dir), r.Mode, r.Reason)
	}
	// Output:
	// r0 RW revision 2 is the highest
	// r1 RW revision 2 is the highest
	// r2 ERR revision 1 below 2
}
