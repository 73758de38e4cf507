package replica_test

import (
	"context"
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

	v, err := replica.CreateVolume(dirs, 1<<20, &replica.VolumeOptions{Counter: replica.CounterOn})
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
		r, err := replica.Open(d, nil)
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

	rep, err := replica.Check(dirs, nil)
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

// Export merges a replica's head and snapshots into one sparse image.
func ExampleExport() {
	root, err := os.MkdirTemp("", "replica-export")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(root)
	r, err := replica.Create(filepath.Join(root, "r"), 1<<20, nil)
	if err != nil {
		panic(err)
	}
	r.WriteAt([]byte("old"), 0)
	r.WriteAt([]byte("kept"), 8192)
	r.Snapshot("s1", nil)
	r.WriteAt([]byte("new"), 0)
	if err := r.Close(); err != nil {
		panic(err)
	}
	st, err := replica.Export(context.Background(), filepath.Join(root, "r"), filepath.Join(root, "vol.img"), nil)
	if err != nil {
		panic(err)
	}
	img, _ := os.ReadFile(filepath.Join(root, "vol.img"))
	fmt.Println(st.Layers, st.DataBytes, string(img[:3]), string(img[8192:8196]))
	// Output: 2 8192 new kept
}
