package schema

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func validTelemetry() Telemetry {
	temp := 48.5
	return Telemetry{SchemaVersion: WireVersion, Node: "gw-1", Time: time.Unix(1700000000, 0).UTC(), Load1: 0.42, CPUs: 4,
		MemoryTotalBytes: 4 << 30, MemoryAvailableBytes: 3 << 30, UptimeSeconds: 3600,
		Disks:              []DiskUsage{{Name: DiskData, Path: "/var/lib/edgeset", SizeBytes: 32 << 30, FreeBytes: 20 << 30}},
		TemperatureCelsius: &temp,
		Instances:          []InstanceUsage{{DaemonSet: "monitoring/exporter", CPUPercent: 12.5, MemoryBytes: 30 << 20}}}
}

func TestDecodeTelemetryRoundTrip(t *testing.T) {
	want := validTelemetry()
	b, err := Encode(want)
	require.NoError(t, err)
	got, err := DecodeTelemetry(b)
	require.NoError(t, err)
	assert.Equal(t, want, got)
}

// TestDecodeTelemetryRefuses: each malformed field is refused with its
// name in the error.
func TestDecodeTelemetryRefuses(t *testing.T) {
	hot := 900.0
	for _, c := range []struct {
		field string
		edit  func(*Telemetry)
	}{
		{"node", func(m *Telemetry) { m.Node = "Not A Node" }},
		{"time", func(m *Telemetry) { m.Time = time.Time{} }},
		{"memoryAvailableBytes", func(m *Telemetry) { m.MemoryAvailableBytes = -1 }},
		{"temperatureCelsius", func(m *Telemetry) { m.TemperatureCelsius = &hot }},
		{"disks[0].name", func(m *Telemetry) { m.Disks[0].Name = "boot" }},
		{"disks", func(m *Telemetry) { m.Disks = make([]DiskUsage, MaxTelemetryDisks+1) }},
		{"instances[0].daemonSet", func(m *Telemetry) { m.Instances[0].DaemonSet = "no-namespace" }},
		{"instances[0].cpuPercent", func(m *Telemetry) { m.Instances[0].CPUPercent = -3 }},
		{"instances", func(m *Telemetry) {
			m.Instances = make([]InstanceUsage, MaxTelemetryInstances+1)
		}},
	} {
		t.Run(c.field, func(t *testing.T) {
			m := validTelemetry()
			c.edit(&m)
			b, err := Encode(m)
			require.NoError(t, err)
			_, err = DecodeTelemetry(b)
			require.Error(t, err)
			assert.True(t, strings.Contains(err.Error(), c.field), "error %q names %s", err, c.field)
		})
	}
	// JSON has no NaN: a load the encoder cannot write is never sent.
	m := validTelemetry()
	m.Load1 = math.NaN()
	_, err := Encode(m)
	assert.Error(t, err)
}
