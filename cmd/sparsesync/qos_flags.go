package main

import (
	"fmt"

	"github.com/spf13/pflag"

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
