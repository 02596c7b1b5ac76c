package edgeagent

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/edgeset/edgeset/schema"
)

// Telemetry defaults: a device is measured every DefaultTelemetryInterval
// and reports only a meaningful change (TelemetryChanged), or at least
// every DefaultTelemetryMaxInterval so the dashboard's "reported ago"
// stays recent. The message is retained, so a restarted controller has
// every node's last report without asking for it again.
const (
	DefaultTelemetryInterval    = 30 * time.Second
	DefaultTelemetryMaxInterval = 6 * time.Hour
)

// TelemetryFunc measures the device; Node fills in the schema version and
// the node name.
type TelemetryFunc func(ctx context.Context) schema.Telemetry

// UsageReader is implemented by a runtime that reports its containers'
// resource usage (the Docker runtime).
type UsageReader interface {
	// Usage returns one sample of a container's usage.
	Usage(ctx context.Context, id string) (ContainerUsage, error)
	// RootDir is the engine's root directory.
	RootDir(ctx context.Context) (string, error)
}

// ContainerUsage is one sample of a container: its CPU time and the
// host's, both cumulative (their changes between two samples give the
// share of the host it used), and its memory in use.
type ContainerUsage struct {
	CPUTotalNanos  uint64
	SystemCPUNanos uint64
	OnlineCPUs     int
	MemoryBytes    int64
}

// telemetryHost is what a Telemeter reads of the device; procHost reads
// /proc and /sys, tests use a fake.
type telemetryHost interface {
	memory() (total, available int64, err error)
	disk(path string) (size, available int64, err error)
	// load1 is the one-minute load average.
	load1() (float64, error)
	// uptime is the time since boot.
	uptime() (time.Duration, error)
	// temperature is the hottest thermal zone in degrees Celsius; ok is
	// false when the device has none.
	temperature() (celsius float64, ok bool)
}

// Telemeter measures a device for its telemetry: the host from /proc and
// /sys, the filesystems of the data directory and of the engine's root,
// and each instance's containers when the runtime reports usage. Safe for
// concurrent use.
type Telemeter struct {
	host    telemetryHost
	rt      Runtime
	node    string
	dataDir string
	now     func() time.Time

	mu   sync.Mutex                // guards last
	last map[string]ContainerUsage // each container's previous sample, by id
}

// NewTelemeter returns a Telemeter of node's device over runtime rt.
func NewTelemeter(node, dataDir string, rt Runtime) *Telemeter {
	return newTelemeter(node, dataDir, rt, procHost{root: "/"}, time.Now)
}

func newTelemeter(node, dataDir string, rt Runtime, host telemetryHost, now func() time.Time) *Telemeter {
	return &Telemeter{host: host, rt: rt, node: node, dataDir: dataDir, now: now, last: map[string]ContainerUsage{}}
}

// Measure takes one sample. A figure that cannot be read is left out (zero,
// or no entry) rather than failing the whole sample.
func (t *Telemeter) Measure(ctx context.Context) schema.Telemetry {
	m := schema.Telemetry{Time: t.now().UTC().Truncate(time.Second), CPUs: runtime.NumCPU()}
	if l, err := t.host.load1(); err == nil {
		m.Load1 = math.Round(l*100) / 100
	}
	if total, avail, err := t.host.memory(); err == nil {
		m.MemoryTotalBytes, m.MemoryAvailableBytes = total, avail
	}
	if up, err := t.host.uptime(); err == nil {
		m.UptimeSeconds = int64(up / time.Second)
	}
	if c, ok := t.host.temperature(); ok {
		c = math.Round(c*10) / 10
		m.TemperatureCelsius = &c
	}
	t.addDisk(&m, schema.DiskData, t.dataDir)
	if ur, ok := t.rt.(UsageReader); ok {
		if root, err := ur.RootDir(ctx); err == nil && root != "" {
			t.addDisk(&m, schema.DiskDocker, root)
		}
		m.Instances = t.instances(ctx, ur)
	}
	return m
}

func (t *Telemeter) addDisk(m *schema.Telemetry, name, path string) {
	if path == "" {
		return
	}
	if size, free, err := t.host.disk(path); err == nil {
		m.Disks = append(m.Disks, schema.DiskUsage{Name: name, Path: path, SizeBytes: size, FreeBytes: free})
	}
}

// instances sums the usage of each instance's running containers; CPU is
// the share of the host between this sample and the container's previous
// one (none the first time a container is seen).
func (t *Telemeter) instances(ctx context.Context, ur UsageReader) []schema.InstanceUsage {
	cs, err := t.rt.List(ctx, t.node)
	if err != nil {
		return nil
	}
	byDS := map[string]*schema.InstanceUsage{}
	seen := map[string]ContainerUsage{}
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, c := range cs {
		ds := c.Labels[LabelDaemonSet]
		if !c.Running || ds == "" {
			continue
		}
		u, err := ur.Usage(ctx, c.ID)
		if err != nil {
			continue
		}
		seen[c.ID] = u
		in := byDS[ds]
		if in == nil {
			in = &schema.InstanceUsage{DaemonSet: ds}
			byDS[ds] = in
		}
		in.MemoryBytes += u.MemoryBytes
		in.CPUPercent += cpuPercent(t.last[c.ID], u)
	}
	t.last = seen // containers gone are forgotten
	out := make([]schema.InstanceUsage, 0, len(byDS))
	for _, in := range byDS {
		in.CPUPercent = math.Round(in.CPUPercent*10) / 10
		out = append(out, *in)
	}
	slices.SortFunc(out, func(a, b schema.InstanceUsage) int { return strings.Compare(a.DaemonSet, b.DaemonSet) })
	return out[:min(len(out), schema.MaxTelemetryInstances)]
}

// cpuPercent is the container's CPU use between two samples in percent of
// one CPU, as `docker stats` computes it; 0 without a usable previous
// sample (the first one, or counters that went back: a restart).
func cpuPercent(prev, cur ContainerUsage) float64 {
	if prev.SystemCPUNanos == 0 || cur.SystemCPUNanos <= prev.SystemCPUNanos || cur.CPUTotalNanos < prev.CPUTotalNanos {
		return 0
	}
	cpus := max(cur.OnlineCPUs, 1)
	return float64(cur.CPUTotalNanos-prev.CPUTotalNanos) / float64(cur.SystemCPUNanos-prev.SystemCPUNanos) * float64(cpus) * 100
}

// Thresholds of a meaningful change (TelemetryChanged).
const (
	loadChangeAbs     = 0.5  // load average, absolute ...
	loadChangeRel     = 0.25 // ... and relative: both must be exceeded
	memoryChangeShare = 0.05 // of total memory
	diskChangeShare   = 0.01 // of the filesystem's size
	tempChange        = 3.0  // degrees Celsius
	instCPUChange     = 10.0 // percentage points of one CPU
	instMemoryShare   = 0.10 // of the instance's previous memory
)

// TelemetryChanged reports whether next differs meaningfully from prev,
// the last telemetry published: a device's figures always move a little,
// and publishing every move would cost a cellular link more than every
// other message the agent sends while idle. Uptime and time never count.
func TelemetryChanged(prev, next schema.Telemetry) bool {
	if d := math.Abs(next.Load1 - prev.Load1); d > loadChangeAbs && d > loadChangeRel*max(prev.Load1, next.Load1) {
		return true
	}
	if next.MemoryTotalBytes != prev.MemoryTotalBytes ||
		shareMoved(prev.MemoryAvailableBytes, next.MemoryAvailableBytes, next.MemoryTotalBytes, memoryChangeShare) {
		return true
	}
	if len(next.Disks) != len(prev.Disks) {
		return true
	}
	for i, d := range next.Disks {
		p := prev.Disks[i]
		if d.Name != p.Name || d.Path != p.Path || d.SizeBytes != p.SizeBytes || shareMoved(p.FreeBytes, d.FreeBytes, d.SizeBytes, diskChangeShare) {
			return true
		}
	}
	switch a, b := prev.TemperatureCelsius, next.TemperatureCelsius; {
	case (a == nil) != (b == nil):
		return true
	case a != nil && math.Abs(*a-*b) >= tempChange:
		return true
	}
	if len(next.Instances) != len(prev.Instances) {
		return true
	}
	for i, in := range next.Instances {
		p := prev.Instances[i]
		if in.DaemonSet != p.DaemonSet || math.Abs(in.CPUPercent-p.CPUPercent) >= instCPUChange ||
			shareMoved(p.MemoryBytes, in.MemoryBytes, p.MemoryBytes, instMemoryShare) {
			return true
		}
	}
	return false
}

// shareMoved reports whether a figure moved by at least share of whole.
func shareMoved(prev, next, whole int64, share float64) bool {
	if whole <= 0 {
		return prev != next
	}
	return math.Abs(float64(next-prev)) >= share*float64(whole)
}

func (h procHost) load1() (float64, error) {
	b, err := os.ReadFile(h.path("proc/loadavg"))
	if err != nil {
		return 0, err
	}
	fields := strings.Fields(string(b))
	if len(fields) == 0 {
		return 0, fmt.Errorf("loadavg: empty")
	}
	return strconv.ParseFloat(fields[0], 64)
}

func (h procHost) uptime() (time.Duration, error) {
	b, err := os.ReadFile(h.path("proc/uptime"))
	if err != nil {
		return 0, err
	}
	fields := strings.Fields(string(b))
	if len(fields) == 0 {
		return 0, fmt.Errorf("uptime: empty")
	}
	s, err := strconv.ParseFloat(fields[0], 64)
	if err != nil {
		return 0, fmt.Errorf("uptime: %w", err)
	}
	return time.Duration(s * float64(time.Second)), nil
}

// temperature reads every /sys/class/thermal/thermal_zone*/temp
// (millidegrees Celsius) and returns the hottest.
func (h procHost) temperature() (float64, bool) {
	zones, _ := filepath.Glob(h.path("sys/class/thermal/thermal_zone*/temp"))
	hottest, ok := 0.0, false
	for _, z := range zones {
		b, err := os.ReadFile(z)
		if err != nil {
			continue
		}
		milli, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		if err != nil {
			continue
		}
		if c := float64(milli) / 1000; !ok || c > hottest {
			hottest, ok = c, true
		}
	}
	return hottest, ok
}
