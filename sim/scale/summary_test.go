package scale

import (
	"reflect"
	"testing"
)

func TestNewSpread(t *testing.T) {
	tests := []struct {
		name string
		xs   []float64
		want Spread
	}{
		{"none", nil, Spread{}},
		{"one", []float64{2}, Spread{2, 2, 2}},
		{"odd count, unsorted", []float64{3.9, 3.4, 3.7}, Spread{3.4, 3.7, 3.9}},
		{"even count: mean of the middle two", []float64{4, 1, 3, 2}, Spread{1, 2.5, 4}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := NewSpread(tc.xs); got != tc.want {
				t.Errorf("NewSpread(%v) = %+v, want %+v", tc.xs, got, tc.want)
			}
		})
	}
}

func TestSummarizeGroupsBySize(t *testing.T) {
	run := func(nodes int, apply, rollout, applyCtl float64) Result {
		return Result{Nodes: nodes, ApplySeconds: apply, RolloutSeconds: rollout,
			ApplyCPU: PhaseCPU{Controller: CPUTime{UserSeconds: applyCtl}}}
	}
	got := Summarize([]Result{run(10000, 3, 5, 1), run(1000, 0.7, 0.6, 0.2), run(10000, 4, 6, 3), run(10000, 3.5, 4, 2)})
	if len(got) != 2 || got[0].Nodes != 1000 || got[1].Nodes != 10000 {
		t.Fatalf("Summarize sizes = %+v, want 1000 then 10000", got)
	}
	want := Summary{Nodes: 10000, Runs: 3, Apply: Spread{3, 3.5, 4}, Rollout: Spread{4, 5, 6}, ApplyController: Spread{1, 2, 3}}
	if !reflect.DeepEqual(got[1], want) {
		t.Errorf("10000 nodes: %+v, want %+v", got[1], want)
	}
	if got[0].Runs != 1 || got[0].Apply != (Spread{0.7, 0.7, 0.7}) {
		t.Errorf("1000 nodes: %+v, want one run of 0.7s", got[0])
	}
}
