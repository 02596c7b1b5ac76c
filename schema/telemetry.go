package schema

import (
	"fmt"
	"math"
	"time"
)

// Bounds of a Telemetry message: a device reports its data directory's
// and its container engine's filesystems, and one entry per instance.
const (
	MaxTelemetryDisks     = 4
	MaxTelemetryInstances = 256
)

// Names of the filesystems a Telemetry reports (DiskUsage.Name).
const (
	DiskData   = "data"   // the agent's data directory
	DiskDocker = "docker" // the container engine's root directory
)

// Telemetry is a device's resource usage, published on TopicTelemetry
// (retained) when it changed meaningfully, and at least every
// telemetry-max-interval. It is informational: nothing is decided on it,
// so a lost message costs nothing but a point of a plot.
type Telemetry struct {
	SchemaVersion int       `json:"schemaVersion"`
	Node          string    `json:"node"`
	Time          time.Time `json:"time"`
	// Load1 is the one-minute load average; CPUs the CPUs online.
	Load1 float64 `json:"load1"`
	CPUs  int     `json:"cpus,omitempty"`
	// MemoryTotalBytes and MemoryAvailableBytes are /proc/meminfo's
	// MemTotal and MemAvailable.
	MemoryTotalBytes     int64       `json:"memoryTotalBytes"`
	MemoryAvailableBytes int64       `json:"memoryAvailableBytes"`
	UptimeSeconds        int64       `json:"uptimeSeconds"`
	Disks                []DiskUsage `json:"disks,omitempty"`
	// TemperatureCelsius is the hottest thermal zone, where the device has
	// one (/sys/class/thermal).
	TemperatureCelsius *float64        `json:"temperatureCelsius,omitempty"`
	Instances          []InstanceUsage `json:"instances,omitempty"`
}

// DiskUsage is one filesystem: its size and the space free to
// unprivileged users.
type DiskUsage struct {
	Name      string `json:"name"` // DiskData or DiskDocker
	Path      string `json:"path"`
	SizeBytes int64  `json:"sizeBytes"`
	FreeBytes int64  `json:"freeBytes"`
}

// InstanceUsage is one instance's containers' usage together, as the
// engine's statistics give it: CPU in percent of one CPU (200 is two
// CPUs busy) over the last telemetry interval, memory in use.
type InstanceUsage struct {
	DaemonSet   string  `json:"daemonSet"`
	CPUPercent  float64 `json:"cpuPercent"`
	MemoryBytes int64   `json:"memoryBytes"`
}

// DecodeTelemetry parses and checks a telemetry-topic payload.
func DecodeTelemetry(b []byte) (Telemetry, error) {
	var m Telemetry
	return m, decodeWire(b, &m, func(e *fieldErrors) { validateTelemetry(e, &m) })
}

func validateTelemetry(errs *fieldErrors, m *Telemetry) {
	validateWireHeader(errs, m.SchemaVersion, m.Node)
	if m.Time.IsZero() {
		errs.add("time", "required")
	}
	nonNegative := func(field string, v float64) {
		if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
			errs.add(field, "must be a finite number >= 0, not %v", v)
		}
	}
	nonNegative("load1", m.Load1)
	nonNegative("cpus", float64(m.CPUs))
	nonNegative("memoryTotalBytes", float64(m.MemoryTotalBytes))
	nonNegative("memoryAvailableBytes", float64(m.MemoryAvailableBytes))
	nonNegative("uptimeSeconds", float64(m.UptimeSeconds))
	if t := m.TemperatureCelsius; t != nil && (math.IsNaN(*t) || math.IsInf(*t, 0) || *t < -100 || *t > 250) {
		errs.add("temperatureCelsius", "must be within -100 and 250, not %v", *t)
	}
	if len(m.Disks) > MaxTelemetryDisks {
		errs.add("disks", "at most %d, not %d", MaxTelemetryDisks, len(m.Disks))
	}
	for i, d := range m.Disks {
		f := fmt.Sprintf("disks[%d]", i)
		if d.Name != DiskData && d.Name != DiskDocker {
			errs.add(f+".name", "unsupported %q: want %s or %s", d.Name, DiskData, DiskDocker)
		}
		nonNegative(f+".sizeBytes", float64(d.SizeBytes))
		nonNegative(f+".freeBytes", float64(d.FreeBytes))
	}
	if len(m.Instances) > MaxTelemetryInstances {
		errs.add("instances", "at most %d, not %d", MaxTelemetryInstances, len(m.Instances))
		return
	}
	for i, in := range m.Instances {
		f := fmt.Sprintf("instances[%d]", i)
		validateDaemonSetKey(errs, f+".daemonSet", in.DaemonSet)
		nonNegative(f+".cpuPercent", in.CPUPercent)
		nonNegative(f+".memoryBytes", float64(in.MemoryBytes))
	}
}
