package telemetry

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgeset/edgeset/schema"
)

var t0 = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

func report(node string, at time.Time, load float64) schema.Telemetry {
	return schema.Telemetry{SchemaVersion: schema.WireVersion, Node: node, Time: at, Load1: load, MemoryAvailableBytes: 1 << 30,
		Disks:     []schema.DiskUsage{{Name: schema.DiskData, Path: "/d", SizeBytes: 100, FreeBytes: 60}},
		Instances: []schema.InstanceUsage{{DaemonSet: "a/x", CPUPercent: 5, MemoryBytes: 10}}}
}

// TestHistoryIsARingOfTheLatest: past the limit the oldest points go,
// and the history comes oldest first, the latest report last.
func TestHistoryIsARingOfTheLatest(t *testing.T) {
	s := New(3)
	for i := range 5 {
		at := t0.Add(time.Duration(i) * time.Minute)
		s.Add(report("gw", at, float64(i)), at)
	}
	n, ok := s.Get("gw")
	require.True(t, ok)
	require.Len(t, n.History, 3)
	for i, p := range n.History {
		assert.Equal(t, float64(i+2), p.Load1)
		assert.Equal(t, t0.Add(time.Duration(i+2)*time.Minute), p.Time)
		require.NotNil(t, p.DataFreeBytes)
		assert.Equal(t, int64(60), *p.DataFreeBytes)
		assert.Nil(t, p.DockerFreeBytes, "not reported")
		assert.Nil(t, p.TemperatureCelsius, "not reported")
	}
	assert.Equal(t, 4.0, n.Latest.Load1)
	_, ok = s.Get("other")
	assert.False(t, ok)
}

// TestFloodKeepsOnlyTheLatest: reports closer than MinSpacing replace the
// latest without growing the history, whatever their devices' clocks say.
func TestFloodKeepsOnlyTheLatest(t *testing.T) {
	s := New(10)
	s.Add(report("gw", t0, 1), t0)
	for i := range 100 {
		at := t0.Add(time.Duration(i+1) * time.Millisecond)
		s.Add(report("gw", at, float64(i)), at)
	}
	n, _ := s.Get("gw")
	assert.Len(t, n.History, 1, "a flood within a second adds no point")
	assert.Equal(t, 99.0, n.Latest.Load1, "the latest report is the flood's last")
	s.Add(report("gw", t0.Add(-time.Hour), 7), t0.Add(2*time.Second))
	n, _ = s.Get("gw")
	assert.Equal(t, 7.0, n.Latest.Load1, "a device clock set back changes nothing")
	require.Len(t, n.History, 2)
	assert.Equal(t, t0.Add(2*time.Second), n.History[1].Time, "points are timed on the controller's clock")
}

func TestNegativeLimitKeepsLatestOnly(t *testing.T) {
	s := New(-1)
	s.Add(report("gw", t0, 1), t0)
	n, ok := s.Get("gw")
	require.True(t, ok)
	assert.Empty(t, n.History)
	s.Delete("gw")
	assert.Zero(t, s.Len())
}

// TestGetReturnsCopies: what Get returns is the caller's.
func TestGetReturnsCopies(t *testing.T) {
	s := New(0)
	s.Add(report("gw", t0, 1), t0)
	n, _ := s.Get("gw")
	n.Latest.Instances[0].CPUPercent = 99
	again, _ := s.Get("gw")
	assert.Equal(t, 5.0, again.Latest.Instances[0].CPUPercent)
}

// BenchmarkMemoryPerNode reports the heap a reporting node costs with a
// full default history and one instance (the package documentation's
// figure): go test -run '^$' -bench MemoryPerNode ./controller/telemetry/
func BenchmarkMemoryPerNode(b *testing.B) {
	const nodes = 10000
	for range b.N {
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		s := New(DefaultLimit)
		for i := range nodes {
			node := fmt.Sprintf("node-%05d", i)
			for k := range DefaultLimit {
				at := t0.Add(time.Duration(k) * time.Minute)
				s.Add(report(node, at, 1), at)
			}
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/nodes, "heap-B/node")
		runtime.KeepAlive(s)
	}
}
