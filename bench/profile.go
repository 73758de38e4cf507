package bench

import (
	"fmt"
	"os"
	"slices"

	"github.com/google/pprof/profile"
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
	var ps []*profile.Profile
	for _, name := range files {
		f, err := os.Open(name)
		if err != nil {
			return nil, err
		}
		p, err := profile.Parse(f)
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("profile %s: %w", name, err)
		}
		ps = append(ps, p)
	}
	if len(ps) == 0 {
		return nil, fmt.Errorf("bench: no profiles to summarise")
	}
	p, err := profile.Merge(ps)
	if err != nil {
		return nil, fmt.Errorf("merging profiles: %w", err)
	}
	vi := valueIndex(p)
	if vi < 0 {
		return nil, fmt.Errorf("bench: %s: not a CPU profile", files[0])
	}
	flat, cum := map[string]int64{}, map[string]int64{}
	var total int64
	for _, s := range p.Sample {
		v := s.Value[vi]
		total += v
		seen := map[string]bool{}
		for li, loc := range s.Location {
			for lj, line := range loc.Line {
				name := "?"
				if line.Function != nil {
					name = line.Function.Name
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
	sum := &ProfileSummary{Total: float64(total) / 1e9, Files: files,
		Flat: top(flat, total, n), Cum: top(cum, total, n)}
	return sum, nil
}

// valueIndex finds the sample value in nanoseconds of CPU time.
func valueIndex(p *profile.Profile) int {
	for i, st := range p.SampleType {
		if st.Type == "cpu" && st.Unit == "nanoseconds" {
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
