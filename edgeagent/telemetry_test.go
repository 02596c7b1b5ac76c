package edgeagent

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgeset/edgeset/schema"
)

// usageRuntime lists containers and reports their usage; the rest of
// Runtime is not used by a Telemeter.
type usageRuntime struct {
	Runtime
	containers []ContainerState
	usage      map[string]ContainerUsage
	root       string
}

func (r *usageRuntime) List(context.Context, string) ([]ContainerState, error) {
	return r.containers, nil
}
func (r *usageRuntime) Usage(_ context.Context, id string) (ContainerUsage, error) {
	return r.usage[id], nil
}
func (r *usageRuntime) RootDir(context.Context) (string, error) { return r.root, nil }

// writeHostFiles lays out the /proc and /sys files a Telemeter reads.
func writeHostFiles(t *testing.T, root string, files map[string]string) {
	for name, content := range files {
		path := filepath.Join(root, name)
		require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
		require.NoError(t, os.WriteFile(path, []byte(content), 0o644))
	}
}

// TestTelemeterMeasures: host figures from /proc and /sys (the hottest
// thermal zone), both filesystems, and per instance the sum of its
// running containers, with CPU from the change between two samples.
func TestTelemeterMeasures(t *testing.T) {
	root := t.TempDir()
	writeHostFiles(t, root, map[string]string{
		"proc/loadavg":                         "0.73 0.51 0.40 2/311 12345\n",
		"proc/meminfo":                         "MemTotal:  4000000 kB\nMemFree: 100 kB\nMemAvailable:  3000000 kB\n",
		"proc/uptime":                          "3725.42 7000.00\n",
		"sys/class/thermal/thermal_zone0/temp": "41000\n",
		"sys/class/thermal/thermal_zone1/temp": "52340\n",
	})
	data, engine := t.TempDir(), t.TempDir()
	ds := func(key string) map[string]string { return map[string]string{LabelDaemonSet: key} }
	rt := &usageRuntime{root: engine, containers: []ContainerState{
		{ID: "a", Running: true, Labels: ds("monitoring/exporter")},
		{ID: "b", Running: true, Labels: ds("monitoring/exporter")}, // an init-less sidecar of the same instance
		{ID: "c", Running: true, Labels: ds("logging/shipper")},
		{ID: "d", Running: false, Labels: ds("logging/shipper")},
	}, usage: map[string]ContainerUsage{
		"a": {CPUTotalNanos: 1e9, SystemCPUNanos: 100e9, OnlineCPUs: 4, MemoryBytes: 10 << 20},
		"b": {CPUTotalNanos: 2e9, SystemCPUNanos: 100e9, OnlineCPUs: 4, MemoryBytes: 5 << 20},
		"c": {CPUTotalNanos: 3e9, SystemCPUNanos: 100e9, OnlineCPUs: 4, MemoryBytes: 7 << 20},
	}}
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	tm := newTelemeter("gw-1", data, rt, procHost{root: root}, func() time.Time { return now })

	first := tm.Measure(context.Background())
	assert.Equal(t, 0.73, first.Load1)
	assert.Equal(t, int64(4000000*1024), first.MemoryTotalBytes)
	assert.Equal(t, int64(3000000*1024), first.MemoryAvailableBytes)
	assert.Equal(t, int64(3725), first.UptimeSeconds)
	require.NotNil(t, first.TemperatureCelsius)
	assert.Equal(t, 52.3, *first.TemperatureCelsius, "the hottest zone, to a tenth of a degree")
	require.Len(t, first.Disks, 2)
	assert.Equal(t, schema.DiskData, first.Disks[0].Name)
	assert.Equal(t, schema.DiskDocker, first.Disks[1].Name)
	assert.Equal(t, engine, first.Disks[1].Path)
	assert.Positive(t, first.Disks[0].SizeBytes)
	assert.Equal(t, []schema.InstanceUsage{
		{DaemonSet: "logging/shipper", MemoryBytes: 7 << 20},
		{DaemonSet: "monitoring/exporter", MemoryBytes: 15 << 20},
	}, first.Instances, "no CPU figure before a second sample; stopped containers count for nothing")

	// 10 s of the host's 4 CPUs later (40 s of CPU time): a used 2 s, b
	// none, c 4 s.
	rt.usage["a"] = ContainerUsage{CPUTotalNanos: 3e9, SystemCPUNanos: 140e9, OnlineCPUs: 4, MemoryBytes: 10 << 20}
	rt.usage["b"] = ContainerUsage{CPUTotalNanos: 2e9, SystemCPUNanos: 140e9, OnlineCPUs: 4, MemoryBytes: 5 << 20}
	rt.usage["c"] = ContainerUsage{CPUTotalNanos: 7e9, SystemCPUNanos: 140e9, OnlineCPUs: 4, MemoryBytes: 7 << 20}
	second := tm.Measure(context.Background())
	require.Len(t, second.Instances, 2)
	assert.Equal(t, 40.0, second.Instances[0].CPUPercent, "c: 4 s of 10 s")
	assert.Equal(t, 20.0, second.Instances[1].CPUPercent, "a and b: 2 s of 10 s")

	b, err := schema.Encode(withHeader(second))
	require.NoError(t, err)
	_, err = schema.DecodeTelemetry(b)
	require.NoError(t, err, "what a Telemeter measures is a valid message")
}

func withHeader(m schema.Telemetry) schema.Telemetry {
	m.SchemaVersion, m.Node = schema.WireVersion, "gw-1"
	return m
}

// TestTelemeterWithoutEngineStatsOrThermal: a runtime that reports no
// usage and a device without thermal zones give host figures only.
func TestTelemeterWithoutEngineStatsOrThermal(t *testing.T) {
	root := t.TempDir()
	writeHostFiles(t, root, map[string]string{"proc/loadavg": "0.10 0.1 0.1 1/2 3\n"})
	tm := newTelemeter("gw-1", t.TempDir(), nil, procHost{root: root}, time.Now)
	m := tm.Measure(context.Background())
	assert.Equal(t, 0.1, m.Load1)
	assert.Nil(t, m.TemperatureCelsius)
	assert.Empty(t, m.Instances)
	assert.Len(t, m.Disks, 1)
	assert.Zero(t, m.MemoryTotalBytes, "an unreadable meminfo leaves the figure out")
}

func TestTelemetryChanged(t *testing.T) {
	temp := func(c float64) *float64 { return &c }
	base := schema.Telemetry{Load1: 1.0, MemoryTotalBytes: 1000, MemoryAvailableBytes: 500, UptimeSeconds: 10,
		Disks:              []schema.DiskUsage{{Name: schema.DiskData, Path: "/d", SizeBytes: 1000, FreeBytes: 400}},
		TemperatureCelsius: temp(50),
		Instances:          []schema.InstanceUsage{{DaemonSet: "a/x", CPUPercent: 20, MemoryBytes: 100}}}
	for _, c := range []struct {
		name     string
		prevLoad float64 // when set, the previous load average
		edit     func(*schema.Telemetry)
		want     bool
	}{
		{"same", 0, func(*schema.Telemetry) {}, false},
		{"uptime and time only", 0, func(m *schema.Telemetry) { m.UptimeSeconds, m.Time = 99999, time.Now() }, false},
		{"load moved little", 0, func(m *schema.Telemetry) { m.Load1 = 1.4 }, false},
		{"load moved 0.6 but under a quarter", 3.0, func(m *schema.Telemetry) { m.Load1 = 3.6 }, false},
		{"load jumped", 0, func(m *schema.Telemetry) { m.Load1 = 2.0 }, true},
		{"memory moved 4% of total", 0, func(m *schema.Telemetry) { m.MemoryAvailableBytes = 540 }, false},
		{"memory moved 5% of total", 0, func(m *schema.Telemetry) { m.MemoryAvailableBytes = 450 }, true},
		{"disk moved under 1%", 0, func(m *schema.Telemetry) { m.Disks[0].FreeBytes = 395 }, false},
		{"disk moved 1%", 0, func(m *schema.Telemetry) { m.Disks[0].FreeBytes = 390 }, true},
		{"disk added", 0, func(m *schema.Telemetry) { m.Disks = append(m.Disks, schema.DiskUsage{Name: schema.DiskDocker}) }, true},
		{"temperature 2 degrees", 0, func(m *schema.Telemetry) { m.TemperatureCelsius = temp(52) }, false},
		{"temperature 3 degrees", 0, func(m *schema.Telemetry) { m.TemperatureCelsius = temp(47) }, true},
		{"temperature gone", 0, func(m *schema.Telemetry) { m.TemperatureCelsius = nil }, true},
		{"instance CPU 9 points", 0, func(m *schema.Telemetry) { m.Instances[0].CPUPercent = 29 }, false},
		{"instance CPU 10 points", 0, func(m *schema.Telemetry) { m.Instances[0].CPUPercent = 30 }, true},
		{"instance memory 10%", 0, func(m *schema.Telemetry) { m.Instances[0].MemoryBytes = 110 }, true},
		{"instance replaced", 0, func(m *schema.Telemetry) { m.Instances[0].DaemonSet = "a/y" }, true},
		{"instance gone", 0, func(m *schema.Telemetry) { m.Instances = nil }, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			prev := base
			prev.Disks = append([]schema.DiskUsage(nil), base.Disks...)
			prev.Instances = append([]schema.InstanceUsage(nil), base.Instances...)
			next := prev
			next.Disks = append([]schema.DiskUsage(nil), prev.Disks...)
			next.Instances = append([]schema.InstanceUsage(nil), prev.Instances...)
			if c.prevLoad != 0 {
				prev.Load1 = c.prevLoad
			}
			c.edit(&next)
			assert.Equal(t, c.want, TelemetryChanged(prev, next))
		})
	}
}

func TestCPUPercent(t *testing.T) {
	prev := ContainerUsage{CPUTotalNanos: 10, SystemCPUNanos: 100, OnlineCPUs: 2}
	assert.Equal(t, 100.0, cpuPercent(prev, ContainerUsage{CPUTotalNanos: 60, SystemCPUNanos: 200, OnlineCPUs: 2}), "half the host's CPU time on 2 CPUs: one CPU busy")
	assert.Zero(t, cpuPercent(ContainerUsage{}, prev), "no previous sample")
	assert.Zero(t, cpuPercent(prev, ContainerUsage{CPUTotalNanos: 5, SystemCPUNanos: 200}), "the container restarted: its counter went back")
	assert.Zero(t, cpuPercent(prev, prev), "no host time passed")
}
