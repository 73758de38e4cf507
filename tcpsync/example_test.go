package tcpsync_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/sparsesync/sparsesync/tcpsync"
)

// Push a sparse file to an in-process server on 127.0.0.1, then push it
// again: the second sync is answered by the quick check.
func Example() {
	dir, _ := os.MkdirTemp("", "tcpsync-example")
	defer os.RemoveAll(dir)
	root := filepath.Join(dir, "root")
	_ = os.Mkdir(root, 0o755)
	src := filepath.Join(dir, "disk.img")
	f, _ := os.Create(src)
	_ = f.Truncate(1 << 30) // 1 GiB, mostly hole
	_, _ = f.WriteAt([]byte("boot sector"), 0)
	_, _ = f.WriteAt([]byte("superblock"), 512<<20)
	f.Close()

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	addr, wait, err := tcpsync.ServeLoopback(ctx, &tcpsync.Server{Root: root, NoAuth: true})
	if err != nil {
		fmt.Println(err)
		return
	}
	opts := &tcpsync.Options{NoAuth: true}
	st, err := tcpsync.PushFile(ctx, addr, src, "disk.img", opts)
	fmt.Println(err, st.Size, st.DataBytes, st.CopiedBytes, st.Verified)
	st, err = tcpsync.PushFile(ctx, addr, src, "disk.img", opts)
	fmt.Println(err, st.QuickCheck, st.CopiedBytes)
	cancel()
	_ = wait()
	// Output:
	// <nil> 1073741824 8192 8192 true
	// <nil> true 0
}
