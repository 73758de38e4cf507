package localsync_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/sparsesync/sparsesync/localsync"
)

// Copy a sparse image, change it, and re-sync the copy: the second call
// writes only the changed block.
func ExampleCopy() {
	dir, err := os.MkdirTemp("", "localsync-example-")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	src, dst := filepath.Join(dir, "disk.img"), filepath.Join(dir, "copy.img")

	f, _ := os.Create(src)
	f.Truncate(1 << 30)                               // a 1 GiB image...
	f.WriteAt(make([]byte, 8192), 0)                  // (zeros written as data)
	f.WriteAt([]byte("hello, sparse world"), 512<<20) // ...with data at 0 and 512 MiB
	f.Close()

	ctx := context.Background()
	st, err := localsync.Copy(ctx, src, dst, nil)
	if err != nil {
		panic(err)
	}
	fmt.Println("size", st.Size, "data", st.DataBytes, "moved", st.ClonedBytes+st.CopiedBytes)

	f, _ = os.OpenFile(src, os.O_RDWR, 0)
	f.WriteAt([]byte("HELLO"), 512<<20)
	f.Close()
	st, err = localsync.Copy(ctx, src, dst, nil)
	if err != nil {
		panic(err)
	}
	fmt.Println("moved", st.ClonedBytes+st.CopiedBytes, "unchanged", st.UnchangedBytes)
	// Output:
	// size 1073741824 data 12288 moved 12288
	// moved 4096 unchanged 8192
}
