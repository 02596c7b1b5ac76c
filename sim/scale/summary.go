package scale

import (
	"cmp"
	"slices"
)

// Spread is the minimum, median and maximum of one figure over runs; the
// median of an even count is the mean of the two middle values.
type Spread struct {
	Min    float64 `json:"min"`
	Median float64 `json:"median"`
	Max    float64 `json:"max"`
}

// NewSpread returns the spread of xs; the zero Spread for none.
func NewSpread(xs []float64) Spread {
	if len(xs) == 0 {
		return Spread{}
	}
	s := slices.Sorted(slices.Values(xs))
	mid := len(s) / 2
	med := s[mid]
	if len(s)%2 == 0 {
		med = (s[mid-1] + s[mid]) / 2
	}
	return Spread{Min: s[0], Median: med, Max: s[len(s)-1]}
}

// Summary is the spread of the figures of the runs of one fleet size.
type Summary struct {
	Nodes    int    `json:"nodes"`
	Runs     int    `json:"runs"`
	Register Spread `json:"register"`
	Apply    Spread `json:"apply"`
	Rollout  Spread `json:"rollout"`
	// CPU seconds of the controller host and of the simulator in the
	// apply and rollout phases.
	ApplyController   Spread `json:"applyController"`
	ApplySimulator    Spread `json:"applySimulator"`
	RolloutController Spread `json:"rolloutController"`
	RolloutSimulator  Spread `json:"rolloutSimulator"`
}

// Summarize groups results by fleet size, smallest first, and returns the
// spread of each size's runs.
func Summarize(results []Result) []Summary {
	bySize := map[int][]Result{}
	for _, r := range results {
		bySize[r.Nodes] = append(bySize[r.Nodes], r)
	}
	var out []Summary
	for nodes, runs := range bySize {
		spread := func(f func(Result) float64) Spread {
			xs := make([]float64, len(runs))
			for i, r := range runs {
				xs[i] = f(r)
			}
			return NewSpread(xs)
		}
		out = append(out, Summary{
			Nodes: nodes, Runs: len(runs),
			Register:          spread(func(r Result) float64 { return r.RegisterSeconds }),
			Apply:             spread(func(r Result) float64 { return r.ApplySeconds }),
			Rollout:           spread(func(r Result) float64 { return r.RolloutSeconds }),
			ApplyController:   spread(func(r Result) float64 { return r.ApplyCPU.Controller.Total() }),
			ApplySimulator:    spread(func(r Result) float64 { return r.ApplyCPU.Simulator.Total() }),
			RolloutController: spread(func(r Result) float64 { return r.RolloutCPU.Controller.Total() }),
			RolloutSimulator:  spread(func(r Result) float64 { return r.RolloutCPU.Simulator.Total() }),
		})
	}
	slices.SortFunc(out, func(a, b Summary) int { return cmp.Compare(a.Nodes, b.Nodes) })
	return out
}
