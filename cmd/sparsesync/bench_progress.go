package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/sparsesync/sparsesync/bench"
	"github.com/sparsesync/sparsesync/internal/bytesize"
)

// benchPlan is what a bench session will do, said before it starts, and
// how far it has come, said after each case: a bare `sparsesync bench`
// runs for hours, and a user must be able to decide whether to wait.
type benchPlan struct {
	cases, runs, tools int
	// weight of each case (its workload's size), in run order, and the
	// total: the time left is the time so far scaled by the work left.
	weights     []int64
	total, done int64
	start       time.Time
	// moved is about how many bytes each place's cases read and write in
	// all: each workload written once, then read and written once by each
	// run of each tool and twice by each run of the floor.
	moved map[string]int64
}

func newBenchPlan(cfg *bench.Config) *benchPlan {
	p := &benchPlan{runs: cfg.Runs, tools: 2 + len(cfg.Peers), start: time.Now()} // floor, sparsesync, peers
	for _, pn := range cfg.Peers {
		if pe, _ := bench.PeerNamed(pn); pe.Network {
			p.tools++ // sparsesync's own network sync, once
			break
		}
	}
	p.moved = map[string]int64{}
	passes := int64(p.runs * (p.tools - 1 + bench.FloorWays)) // the floor moves the data bench.FloorWays times
	holes := int64(0)                                         // floor-holes, in copy cases: as many again
	if cfg.FloorHoles && slices.Contains(cfg.Scenarios, bench.ScenarioCopy) {
		p.tools++
		holes = int64(p.runs * bench.FloorWays)
	}
	for _, wn := range cfg.Workloads {
		w, _ := bench.WorkloadNamed(wn)
		for _, pl := range cfg.Places {
			for _, sc := range cfg.Scenarios {
				p.weights = append(p.weights, w.ScaledSize(&cfg.Gen))
				p.total += w.ScaledSize(&cfg.Gen)
				d := w.ScaledData(&cfg.Gen)
				n := passes
				if sc == bench.ScenarioCopy {
					n += holes
				}
				p.moved[pl.Dir] += d + n*2*d
			}
		}
	}
	p.cases = len(p.weights)
	return p
}

// intro is the line printed before anything runs. rate gives each place's
// measured write rate in bytes per second (probeWriteRate); the estimate
// is the bytes the cases move there over that rate, a lower bound (it
// leaves out process starts, syncs and network cases' overhead).
func (p *benchPlan) intro(cfg *bench.Config, rate func(dir string) (float64, error)) string {
	s := fmt.Sprintf("sparsesync: bench: %d cases (workloads %d x scenarios %d x places %d), %d rounds of up to %d tools each (the floor, sparsesync, peers): %d runs over %s of workloads (each run writes its case's data once)",
		p.cases, len(cfg.Workloads), len(cfg.Scenarios), len(cfg.Places), p.runs, p.tools, p.cases*p.runs*p.tools, bytesize.Format(p.total))
	var est time.Duration
	var rates []string
	for _, pl := range cfg.Places {
		r, err := rate(pl.Dir)
		if err != nil || r <= 0 {
			return s + fmt.Sprintf("; no time estimate (probing %s: %v); the time left follows each case", pl.Dir, err)
		}
		est += time.Duration(float64(p.moved[pl.Dir]) / r * float64(time.Second))
		rates = append(rates, bytesize.Format(int64(r))+"/s")
	}
	return s + fmt.Sprintf("; at least %s (%s of data read and written, at the write rate a 64 MiB probe measured: %s); the time left follows each case",
		est.Round(time.Second), bytesize.Format(sumValues(p.moved)), strings.Join(rates, ", "))
}

func sumValues(m map[string]int64) int64 {
	n := int64(0)
	for _, v := range m {
		n += v
	}
	return n
}

// probeWriteRate writes 64 MiB to a new file in dir, durably, and returns
// the bytes per second it took: the rate bench's estimate is made at.
func probeWriteRate(dir string) (float64, error) {
	const size, chunk = 64 << 20, 1 << 20
	f, err := os.CreateTemp(dir, ".sparsesync-bench-probe-")
	if err != nil {
		return 0, err
	}
	defer os.Remove(f.Name())
	defer f.Close()
	buf := make([]byte, chunk)
	for i := range buf {
		buf[i] = byte(i*7 + 1) // not zeros: no filesystem may skip them
	}
	start := time.Now()
	for off := int64(0); off < size; off += chunk {
		if _, err := f.WriteAt(buf, off); err != nil {
			return 0, err
		}
	}
	if err := f.Sync(); err != nil {
		return 0, err
	}
	return size / time.Since(start).Seconds(), nil
}

// caseDone records case number done (1-based) and returns its line.
func (p *benchPlan) caseDone(c bench.Case, done int) string {
	if done-1 < len(p.weights) {
		p.done += p.weights[done-1]
	}
	elapsed := time.Since(p.start)
	left := "done"
	if p.done > 0 && done < p.cases {
		rest := time.Duration(float64(elapsed) * float64(p.total-p.done) / float64(p.done))
		left = "about " + rest.Round(time.Second).String() + " left"
	}
	return fmt.Sprintf("sparsesync: bench: case %d/%d done: %s %s on %s, after %s; %s",
		done, p.cases, c.Workload, c.Scenario, c.Place, elapsed.Round(time.Second), left)
}

// caseLog appends each finished case to a file as one JSON object a line
// (--jsonl): what a long session has measured survives its failure.
type caseLog struct {
	f   *os.File
	enc *json.Encoder
	err error
}

func openCaseLog(path string) (*caseLog, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, fmt.Errorf("bench: --jsonl: %w", err)
	}
	return &caseLog{f: f, enc: json.NewEncoder(f)}, nil
}

func (l *caseLog) write(c bench.Case) {
	if l == nil || l.err != nil {
		return
	}
	if err := l.enc.Encode(c); err != nil {
		l.err = fmt.Errorf("bench: --jsonl %s: %w", l.f.Name(), err)
	}
}

func (l *caseLog) close() error {
	if l == nil {
		return nil
	}
	if err := l.f.Close(); err != nil && l.err == nil {
		l.err = fmt.Errorf("bench: --jsonl %s: %w", l.f.Name(), err)
	}
	return l.err
}

// benchPartial prints the cases a failed or interrupted session finished
// (in the format asked for) and returns the session's error, saying how
// much was done.
func benchPartial(w io.Writer, opts *benchOpts, rep *bench.Report, cases int, err error) error {
	if rep == nil || len(rep.Cases) == 0 {
		return &benchStopped{cases: cases, err: err}
	}
	rep.Finished = time.Now().UTC()
	var werr error
	switch {
	case opts.json:
		werr = rep.WriteJSON(w)
	case opts.markdown:
		werr = rep.WriteMarkdown(w)
	default:
		werr = rep.WriteTable(w)
	}
	return &benchStopped{done: len(rep.Cases), cases: cases, printErr: werr, err: err}
}

// benchStopped is a session that stopped before its last case.
type benchStopped struct {
	done, cases int
	printErr    error // printing the finished cases failed
	err         error
}

func (e *benchStopped) Error() string { return "bench: " + e.note() + ": " + e.err.Error() }

func (e *benchStopped) Unwrap() []error {
	if e.printErr != nil {
		return []error{e.err, e.printErr}
	}
	return []error{e.err}
}

func (e *benchStopped) note() string {
	if e.done == 0 {
		return fmt.Sprintf("stopped before the first of %d cases finished", e.cases)
	}
	where := "printed above"
	if e.printErr != nil {
		where = fmt.Sprintf("not printed: %v", e.printErr)
	}
	return fmt.Sprintf("stopped after %d of %d cases (their results %s)", e.done, e.cases, where)
}
