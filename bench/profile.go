package bench

import (
	"fmt"
	"os"
	"slices"
)

// ProfileSummary is where a tool's CPU time went, from its CPU profiles
// (all runs merged): the top functions by flat time (spent in the function
// itself) and by cumulative time (in it or what it called).
type ProfileSummary struct {
	// Total is the CPU time the profiles sampled, in seconds.
	Total float64 `json:"total_s"`
	// Files are the profiles summarised (one per run).
	Files []string   `json:"files"`
	Flat  []FuncTime `json:"top_flat"`
	Cum   []FuncTime `json:"top_cum"`
}

// FuncTime is one function's share of the profile.
type FuncTime struct {
	Func    string  `json:"func"`
	Seconds float64 `json:"seconds"`
	// Share is Seconds over the profile's total.
	Share float64 `json:"share"`
}

// SummarizeProfiles merges the CPU profiles in files and returns the top n
// functions by flat and by cumulative time.
func SummarizeProfiles(files []string, n int) (*ProfileSummary, error) {
	var ps []*cpuProfile
	for _, name := range files {
		f, err := os.Open(name)
		if err != nil {
			return nil, err
		}
		p, err := parseCPUProfile(f)
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("profile %s: %w", name, err)
		}
		ps = append(ps, p)
	}
	if len(ps) == 0 {
		return nil, fmt.Errorf("bench: no profiles to summarise")
	}
	flat, cum := map[string]int64{}, map[string]int64{}
	var total int64
	for i, p := range ps {
		vi := valueIndex(p)
		if vi < 0 {
			return nil, fmt.Errorf("bench: %s: not a CPU profile", files[i])
		}
		for _, s := range p.samples {
			v := s.values[vi]
			total += v
			seen := map[string]bool{}
			for li, loc := range s.locations {
				for lj, fn := range p.funcs[loc] {
					name, ok := p.names[fn]
					if !ok {
						name = "?"
					}
					// The leaf is the first line of the first location
					// (inlined frames come first).
					if li == 0 && lj == 0 {
						flat[name] += v
					}
					if !seen[name] {
						seen[name] = true
						cum[name] += v
					}
				}
			}
		}
	}
	sum := &ProfileSummary{Total: float64(total) / 1e9, Files: files,
		Flat: top(flat, total, n), Cum: top(cum, total, n)}
	return sum, nil
}

// valueIndex finds the sample value in nanoseconds of CPU time.
func valueIndex(p *cpuProfile) int {
	for i, st := range p.sampleTypes {
		if st.typ == "cpu" && st.unit == "nanoseconds" {
			return i
		}
	}
	return -1
}

func top(m map[string]int64, total int64, n int) []FuncTime {
	out := make([]FuncTime, 0, len(m))
	for name, v := range m {
		share := 0.0
		if total > 0 {
			share = float64(v) / float64(total)
		}
		out = append(out, FuncTime{Func: name, Seconds: float64(v) / 1e9, Share: share})
	}
	slices.SortFunc(out, func(a, b FuncTime) int {
		if a.Seconds != b.Seconds {
			if a.Seconds > b.Seconds {
				return -1
			}
			return 1
		}
		if a.Func < b.Func {
			return -1
		}
		if a.Func > b.Func {
			return 1
		}
		return 0
	})
	return out[:min(n, len(out))]
}
