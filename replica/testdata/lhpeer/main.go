// Command lhpeer runs longhorn-engine's own pkg/replica (unmodified, built
// from /work/shared/peers) on one replica directory, for the mixed-writer
// tests of package replica (lhpeer_test.go builds it into a temporary
// directory; it is not part of sparsesync).
//
//	lhpeer -dir D -size N -counter on|off OP...
//
// Every OP runs in order on one construct (replica.New) of D:
//
//	write:N:SEED  N WriteAt calls of 4 KiB at 4 KiB-aligned offsets drawn from SEED
//	rev           print {"revision": GetRevisionCounter()}
//	sha           print {"sha256": ...} of the whole volume read with ReadAt
//	delete        Delete (replica.go): images, .meta, volume.meta, revision.counter
//	close         Close (volume.meta Dirty=false)
//
// New with -counter off is --disableRevCounter. Ops after delete or close
// reopen the directory with New.
package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"

	"github.com/longhorn/longhorn-engine/pkg/replica"
	"github.com/longhorn/longhorn-engine/pkg/types"
	diskutil "github.com/longhorn/longhorn-engine/pkg/util/disk"
)

func main() {
	dir := flag.String("dir", "", "replica directory")
	size := flag.Int64("size", 1<<20, "volume size for a new replica")
	counter := flag.String("counter", "on", "revision counter: on or off")
	flag.Parse()
	if err := run(*dir, *size, *counter == "off", flag.Args()); err != nil {
		fmt.Fprintln(os.Stderr, "lhpeer:", err)
		os.Exit(1)
	}
}

func open(ctx context.Context, dir string, size int64, off bool) (*replica.Replica, error) {
	return replica.New(ctx, size, diskutil.ReplicaSectorSize, dir, nil, off, false,
		types.MaximumTotalSnapshotCount, 0, false, false, types.ReplicaStateInitial, 0)
}

func run(dir string, size int64, off bool, ops []string) error {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var r *replica.Replica
	out := json.NewEncoder(os.Stdout)
	for _, op := range ops {
		if r == nil {
			var err error
			if r, err = open(ctx, dir, size, off); err != nil {
				return fmt.Errorf("New %s: %w", dir, err)
			}
		}
		f := strings.Split(op, ":")
		switch f[0] {
		case "write":
			n, _ := strconv.Atoi(f[1])
			seed, _ := strconv.ParseUint(f[2], 10, 64)
			rng := rand.New(rand.NewPCG(seed, 24))
			vs := r.Info().Size
			buf := make([]byte, 4096)
			for range n {
				for i := range buf {
					buf[i] = byte(rng.Uint32())
				}
				if _, err := r.WriteAt(buf, rng.Int64N(vs/4096)*4096); err != nil {
					return fmt.Errorf("WriteAt: %w", err)
				}
			}
		case "rev":
			if err := out.Encode(map[string]int64{"revision": r.GetRevisionCounter()}); err != nil {
				return err
			}
		case "sha":
			buf := make([]byte, r.Info().Size)
			if _, err := r.ReadAt(buf, 0); err != nil {
				return fmt.Errorf("ReadAt: %w", err)
			}
			sum := sha256.Sum256(buf)
			if err := out.Encode(map[string]string{"sha256": hex.EncodeToString(sum[:])}); err != nil {
				return err
			}
		case "delete":
			if err := r.Delete(); err != nil {
				return fmt.Errorf("Delete: %w", err)
			}
			r.CloseWithoutWritingMetaData()
			r = nil
		case "close":
			if err := r.Close(); err != nil {
				return fmt.Errorf("Close: %w", err)
			}
			r = nil
		default:
			return fmt.Errorf("unknown op %q", op)
		}
	}
	if r != nil {
		return r.Close()
	}
	return nil
}
