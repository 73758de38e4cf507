package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/sparsesync/sparsesync/internal/patternfile"
)

// RunMultiSource writes one image into a root per server (each its own
// copy: a server serves no hard-linked file), starts the servers, each
// limited to cfg.Rate, and pulls the image from 1, 2, 3... of them into a
// new file: first once from all of them (round 0: every server computes its
// manifest), then cfg.Rounds interleaved rounds, the order of the numbers
// of sources rotating per round.
func RunMultiSource(ctx context.Context, cfg MultiSourceConfig) ([]MultiSourceRow, error) {
	if cfg.Size <= 0 {
		cfg.Size = 2 << 30
	}
	if cfg.DataPercent <= 0 || cfg.DataPercent > 100 {
		cfg.DataPercent = 10
	}
	if len(cfg.Sources) == 0 {
		cfg.Sources = []int{1, 2, 3}
	}
	if cfg.Rounds <= 0 {
		cfg.Rounds = 3
	}
	servers := 0
	for _, n := range cfg.Sources {
		servers = max(servers, n)
	}
	l := MultiSourceLayout(cfg.Size, cfg.DataPercent)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var from []string
	var cmds []*exec.Cmd
	defer func() {
		for _, c := range cmds {
			_ = c.Process.Kill()
			_ = c.Wait()
		}
	}()
	for i := range servers {
		root := filepath.Join(cfg.Dir, fmt.Sprintf("multisource-%d", i))
		if err := os.MkdirAll(root, 0o755); err != nil {
			return nil, err
		}
		if err := patternfile.Write(filepath.Join(root, "disk.img"), l); err != nil {
			return nil, err
		}
		cmd, addr, err := startServe(ctx, cfg.Serve(root, cfg.Rate))
		if err != nil {
			return nil, fmt.Errorf("bench: starting server %d: %w", i+1, err)
		}
		cmds = append(cmds, cmd)
		from = append(from, addr+"/disk.img")
	}
	dst := filepath.Join(cfg.Dir, "multisource-copy.img")
	var rows []MultiSourceRow
	pull := func(n, round int) {
		r := MultiSourceRow{Sources: n, Round: round}
		for _, p := range []string{dst, dst + ".tcpsync"} {
			_ = os.Remove(p)
		}
		argv := cfg.Pull(dst, from[:n])
		var out, errb bytes.Buffer
		c := exec.CommandContext(ctx, argv[0], argv[1:]...)
		c.Stdout, c.Stderr = &out, &errb
		start := time.Now()
		err := c.Run()
		r.Seconds = time.Since(start).Seconds()
		var res struct {
			Copied int64 `json:"copied_bytes"`
			Sent   int64 `json:"wire_bytes_sent"`
			Recv   int64 `json:"wire_bytes_received"`
		}
		if err == nil {
			err = json.Unmarshal(out.Bytes(), &res)
		}
		if err != nil {
			r.Error = fmt.Sprintf("%v: %s", err, strings.TrimSpace(errb.String()))
		}
		r.CopiedBytes, r.WireBytes = res.Copied, res.Sent+res.Recv
		rows = append(rows, r)
	}
	pull(servers, 0)
	for round := 1; round <= cfg.Rounds; round++ {
		for i := range cfg.Sources {
			if ctx.Err() != nil {
				return rows, context.Cause(ctx)
			}
			pull(cfg.Sources[(i+round-1)%len(cfg.Sources)], round)
		}
	}
	_ = os.Remove(dst)
	_ = os.Remove(dst + ".tcpsync")
	var errs []error
	for _, r := range rows {
		if r.Error != "" {
			errs = append(errs, fmt.Errorf("%d sources, round %d: %s", r.Sources, r.Round, r.Error))
		}
	}
	return rows, errors.Join(errs...)
}
