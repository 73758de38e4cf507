package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/spf13/pflag"

	"github.com/sparsesync/sparsesync/internal/bytesize"
	"github.com/sparsesync/sparsesync/qos"
)

// qosFlags are --bwlimit and --ionice, shared by the commands that move
// bytes.
type qosFlags struct {
	bwlimit string
	ionice  string
}

func (q *qosFlags) register(f *pflag.FlagSet) {
	f.StringVar(&q.bwlimit, "bwlimit", "0", "limit reads from storage, writes to it and network traffic to RATE each: "+qos.RateSyntax)
	f.StringVar(&q.ionice, "ionice", "", "I/O priority of this process: idle, best-effort or best-effort:0-7 (0 highest; honoured by the BFQ scheduler)")
}

// registerTransfer declares the flags every command that moves a file has:
// --json, --progress and the two above.
func (q *qosFlags) registerTransfer(f *pflag.FlagSet, json *bool, progress *string) {
	f.BoolVar(json, "json", false, "print the result as one JSON object")
	f.StringVar(progress, "progress", "auto", "progress bar on stderr: auto (on a terminal), always or never")
	q.register(f)
}

// rate is --bwlimit in bytes per second (0: unlimited, or not valid:
// budget reports that).
func (q *qosFlags) rate() int64 {
	r, err := qos.ParseRate(q.bwlimit)
	if err != nil || q.bwlimit == "" {
		return 0
	}
	return r
}

// check parses both flags and applies nothing.
func (q *qosFlags) check() error {
	if q.bwlimit != "" {
		if _, err := qos.ParseRate(q.bwlimit); err != nil {
			return usageError{fmt.Errorf("--bwlimit: %w", err)}
		}
	}
	if _, err := qos.ParseIOPriority(q.ionice); err != nil {
		return usageError{fmt.Errorf("--ionice: %w", err)}
	}
	return nil
}

// budget parses --bwlimit and applies --ionice to this process. The
// returned Budget is unlimited for --bwlimit 0.
func (q *qosFlags) budget() (qos.Budget, int64, error) {
	rate, err := int64(0), error(nil)
	if q.bwlimit != "" { // the zero qosFlags: no limit
		rate, err = qos.ParseRate(q.bwlimit)
	}
	if err != nil {
		return qos.Budget{}, 0, usageError{fmt.Errorf("--bwlimit: %w", err)}
	}
	prio, err := qos.ParseIOPriority(q.ionice)
	if err != nil {
		return qos.Budget{}, 0, usageError{fmt.Errorf("--ionice: %w", err)}
	}
	if err := qos.SetIOPriority(prio); err != nil {
		return qos.Budget{}, 0, err
	}
	if rate == 0 {
		return qos.Budget{}, 0, nil
	}
	return qos.NewBudget(rate), rate, nil
}

// readRateFile reads a RATE (qos.ParseRate: one line, "50M", "0") from
// path: the limit file of serve and disks, re-read on SIGHUP.
func readRateFile(path string) (int64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	r, err := qos.ParseRate(strings.TrimSpace(string(b)))
	if err != nil {
		return 0, fmt.Errorf("%s: %w", path, err)
	}
	return r, nil
}

// nodeBudget is the budget of a long-running command (serve, disks):
// --bwlimit, or the RATE in --bwlimit-file, which SIGHUP re-reads
// (reloadRate). It is a Budget even when unlimited, so that a reload can
// limit it later.
func (q *qosFlags) nodeBudget(rateFile string) (qos.Budget, error) {
	b, rate, err := q.budget()
	if err != nil {
		return b, err
	}
	if rateFile != "" {
		if q.bwlimit != "0" && q.bwlimit != "" {
			return b, usageError{fmt.Errorf("--bwlimit and --bwlimit-file are exclusive")}
		}
		if rate, err = readRateFile(rateFile); err != nil {
			return b, usageError{fmt.Errorf("--bwlimit-file: %w", err)}
		}
	}
	return qos.NewBudget(rate), nil
}

// reloadRate re-reads rateFile into b (SIGHUP): the running syncs take
// the new rate from their next piece, a tenth of a second of it. A file
// that cannot be read or holds no valid RATE keeps the old limit; the
// returned text says which happened, for the log.
func reloadRate(b qos.Budget, rateFile string) (string, error) {
	r, err := readRateFile(rateFile)
	if err != nil {
		return "", fmt.Errorf("--bwlimit-file: %w; keeping the limit of %s", err, rateText(b.Wire.Rate()))
	}
	b.SetRate(r)
	return fmt.Sprintf("the limit file %s (%s)", rateFile, rateText(r)), nil
}

// rateText shows a rate in bytes per second the way --bwlimit takes it.
func rateText(r int64) string {
	if r <= 0 {
		return "unlimited"
	}
	return bytesize.Format(r) + "/s"
}
