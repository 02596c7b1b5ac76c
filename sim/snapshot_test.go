package sim

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// TestMergeReports: the report of a fleet run as several processes sums
// their counts, keeps the slowest ramp and the latest instant, and takes
// the percentiles of every connect time together, not of the parts'.
func TestMergeReports(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 15, 0, 0, 0, time.UTC)
	a := Report{Nodes: 3, Offline: 1, RampSeconds: 2, DurationSeconds: 9, Final: Snapshot{At: t0, Nodes: 3, Announced: 3, Ready: 2,
		DaemonSets: map[string]map[string]Count{"fleet/log": {"r1": {Instances: 2, Ready: 2}}}}}
	b := Report{Nodes: 2, NeverConnected: 1, RampSeconds: 3, DurationSeconds: 8, Final: Snapshot{At: t0.Add(time.Second), Nodes: 2, Announced: 1, Ready: 1,
		DaemonSets: map[string]map[string]Count{"fleet/log": {"r1": {Instances: 1, Ready: 1}, "r2": {Instances: 1}}}}}
	r := MergeReports([]Report{a, b}, [][]float64{{0.1, 0.2, 0.3}, {5}})
	assert.Equal(t, 5, r.Nodes)
	assert.Equal(t, 1, r.Offline)
	assert.Equal(t, 1, r.NeverConnected)
	assert.Equal(t, 3.0, r.RampSeconds)
	assert.Equal(t, 9.0, r.DurationSeconds)
	assert.Equal(t, t0.Add(time.Second), r.Final.At)
	assert.Equal(t, 4, r.Final.Announced)
	assert.Equal(t, 3, r.Final.Ready)
	assert.Equal(t, map[string]map[string]Count{"fleet/log": {"r1": {Instances: 3, Ready: 3}, "r2": {Instances: 1}}}, r.Final.DaemonSets)
	assert.Equal(t, Percentiles{Count: 4, P50: 0.2, P90: 5, P99: 5, Max: 5}, r.ConnectSeconds)
	assert.Equal(t, map[string]map[string]Count{"fleet/log": {"r1": {Instances: 2, Ready: 2}}}, a.Final.DaemonSets, "a part's snapshot is not modified")
}
