package edgeagent

import (
	"context"
	"fmt"
	"maps"
	"net/netip"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/edgeset/edgeset/schema"
)

// Default pressure thresholds, the kubelet's hard eviction defaults where it
// has one (memory.available<100Mi, nodefs.available<10%).
const (
	DefaultDiskMinFreePercent = 10.0
	DefaultDiskMinFreeBytes   = 1 << 30 // 1 GiB
	DefaultMemoryMinAvailable = 100 << 20
	DefaultPIDMaxPercent      = 90.0
	// runtimeInfoTimeout bounds the Ready probe of the container runtime.
	runtimeInfoTimeout = 5 * time.Second
)

// Thresholds decide the pressure conditions. A zero field takes its
// default; a negative one disables that criterion.
type Thresholds struct {
	// DiskMinFreePercent and DiskMinFreeBytes: DiskPressure is True when
	// the space available on the data directory's filesystem is below the
	// smaller of the two (10% of the filesystem, 1 GiB), so a large disk
	// is not in pressure with gigabytes free and a small SD card not at
	// 88%. With both disabled DiskPressure is always False.
	DiskMinFreePercent float64
	DiskMinFreeBytes   int64
	// MemoryMinAvailable: MemoryPressure is True when MemAvailable is below
	// it (default 100 MiB).
	MemoryMinAvailable int64
	// PIDMaxPercent: PIDPressure is True when the processes and threads in
	// use reach this share of kernel.pid_max (default 90%).
	PIDMaxPercent float64
}

func (t Thresholds) withDefaults() Thresholds {
	if t.DiskMinFreePercent == 0 {
		t.DiskMinFreePercent = DefaultDiskMinFreePercent
	}
	if t.DiskMinFreeBytes == 0 {
		t.DiskMinFreeBytes = DefaultDiskMinFreeBytes
	}
	if t.MemoryMinAvailable == 0 {
		t.MemoryMinAvailable = DefaultMemoryMinAvailable
	}
	if t.PIDMaxPercent == 0 {
		t.PIDMaxPercent = DefaultPIDMaxPercent
	}
	return t
}

// automaticLabels are set by the agent itself, as kubelet sets its own; a
// configured label may not use these keys.
var automaticLabels = []string{
	schema.LabelHostname, schema.LabelOS, schema.LabelArch,
	schema.LabelAgentVersion, schema.LabelRuntime, schema.LabelPrefetch,
}

// AnnounceConfig configures an Announcer.
type AnnounceConfig struct {
	// NodeName is the node's name; required.
	NodeName string
	// Hostname defaults to os.Hostname, lowercased.
	Hostname string
	// Labels are the operator's labels for this device. The automatic keys
	// (kubernetes.io/hostname, kubernetes.io/os, kubernetes.io/arch,
	// edgeset.io/agent-version, edgeset.io/runtime, edgeset.io/prefetch)
	// are refused: they must describe the device truthfully, since
	// daemonsets select on them and the controller reads the last.
	// Other kubernetes.io keys (topology.kubernetes.io/zone) are allowed.
	Labels map[string]string
	// Taints are announced as given.
	Taints []schema.Taint
	// DataDir is the directory whose filesystem DiskPressure watches
	// (the agent's data directory); default ".".
	DataDir string
	// Thresholds decide the pressure conditions.
	Thresholds Thresholds
	// Clock stamps condition transitions; default time.Now.
	Clock func() time.Time
}

// Announcer measures the node's status. Its Status method is a StatusFunc.
// A condition's Since is the time its status last changed, so successive
// statuses of an unchanged device are equal and the Node publishes nothing.
type Announcer struct {
	cfg    AnnounceConfig
	rt     Runtime
	host   hostProbe
	labels map[string]string // operator labels plus the fixed automatic ones

	mu    sync.Mutex                      // guards since
	since map[string]schema.NodeCondition // last condition of each type
}

// NewAnnouncer returns an Announcer of the device over runtime rt, after
// cfg.Validate. It makes no call on rt.
func NewAnnouncer(cfg AnnounceConfig, rt Runtime) (*Announcer, error) {
	return newAnnouncer(cfg, rt, procHost{root: "/"})
}

func newAnnouncer(cfg AnnounceConfig, rt Runtime, host hostProbe) (*Announcer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	a := &Announcer{cfg: cfg, rt: rt, host: host, since: map[string]schema.NodeCondition{}}
	a.labels = maps.Clone(cfg.Labels)
	if a.labels == nil {
		a.labels = map[string]string{}
	}
	if v := hostnameLabel(cfg.Hostname, cfg.NodeName); v != "" {
		a.labels[schema.LabelHostname] = v
	}
	a.labels[schema.LabelOS] = runtime.GOOS
	a.labels[schema.LabelArch] = runtime.GOARCH
	if v := schema.Version; labelValueOK(v) {
		a.labels[schema.LabelAgentVersion] = v
	}
	a.labels[schema.LabelPrefetch] = "true" // this agent prefetches (schema.DesiredState.Prefetch)
	return a, nil
}

func (c AnnounceConfig) withDefaults() AnnounceConfig {
	if c.Hostname == "" {
		h, _ := os.Hostname()
		c.Hostname = strings.ToLower(h)
	}
	if c.DataDir == "" {
		c.DataDir = "."
	}
	if c.Clock == nil {
		c.Clock = time.Now
	}
	c.Thresholds = c.Thresholds.withDefaults()
	return c
}

// Validate refuses the automatic label keys and checks the node name,
// labels and taints exactly as the controller will when it decodes the
// status, naming each bad one.
func (c AnnounceConfig) Validate() error {
	var problems []string
	for _, k := range automaticLabels {
		if _, ok := c.Labels[k]; ok {
			problems = append(problems, fmt.Sprintf("label %q is set by the agent and may not be configured", k))
		}
	}
	st := schema.NodeStatus{SchemaVersion: schema.WireVersion, Node: c.NodeName, Labels: c.Labels, Taints: c.Taints}
	b, err := schema.Encode(st)
	if err == nil {
		_, err = schema.DecodeNodeStatus(b)
	}
	if err != nil {
		problems = append(problems, err.Error())
	}
	if len(problems) > 0 {
		return fmt.Errorf("node announcement: %s", strings.Join(problems, "; "))
	}
	return nil
}

// hostnameLabel is the kubernetes.io/hostname value: the lowercased
// hostname, or the node name when the hostname is not a valid label value,
// or "" when neither is.
func hostnameLabel(hostname, node string) string {
	for _, v := range []string{strings.ToLower(hostname), node} {
		if v != "" && labelValueOK(v) {
			return v
		}
	}
	return ""
}

// labelValueOK reports whether v is a valid, non-empty label value.
func labelValueOK(v string) bool {
	if v == "" || len(v) > 63 {
		return false
	}
	for i := 0; i < len(v); i++ {
		c := v[i]
		alnum := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
		edge := i == 0 || i == len(v)-1
		if !alnum && (edge || c != '-' && c != '_' && c != '.') {
			return false
		}
	}
	return true
}

// Status measures the node now. It never fails: what cannot be measured is
// reported as an Unknown condition or left out.
func (a *Announcer) Status(ctx context.Context) schema.NodeStatus {
	info, rtErr := a.runtimeInfo(ctx)
	labels := maps.Clone(a.labels)
	if info.Name != "" {
		labels[schema.LabelRuntime] = info.Name
	}
	kernel := a.host.kernelVersion()
	addrs, addrErr := a.host.addresses()
	st := schema.NodeStatus{
		SchemaVersion: schema.WireVersion,
		Node:          a.cfg.NodeName,
		Labels:        labels,
		Taints:        slices.Clone(a.cfg.Taints),
		Addresses:     nodeAddresses(addrs, a.cfg.Hostname),
		Capacity:      a.capacity(),
		Info: schema.NodeInfo{
			OS: runtime.GOOS, Arch: runtime.GOARCH, Hostname: a.cfg.Hostname,
			KernelVersion: kernel, AgentVersion: schema.Version,
			Runtime: info.Name, RuntimeVersion: info.Version,
		},
	}
	st.Conditions = a.stamp([]schema.NodeCondition{
		readyCondition(rtErr),
		a.diskCondition(),
		a.memoryCondition(),
		a.pidCondition(),
		networkCondition(addrs, addrErr),
	})
	return st
}

func (a *Announcer) runtimeInfo(ctx context.Context) (RuntimeInfo, error) {
	ctx, cancel := context.WithTimeout(ctx, runtimeInfoTimeout)
	defer cancel()
	return a.rt.Info(ctx)
}

// capacity reports cpu and memory (in Ki, as kubelet does); memory is left
// out when /proc/meminfo cannot be read.
func (a *Announcer) capacity() schema.ResourceList {
	rl := schema.ResourceList{"cpu": schema.Quantity(strconv.Itoa(runtime.NumCPU()))}
	if total, _, err := a.host.memory(); err == nil {
		rl["memory"] = schema.Quantity(strconv.FormatInt(total/1024, 10) + "Ki")
	}
	return rl
}

// nodeAddresses lists the InternalIP addresses, sorted, then the Hostname.
func nodeAddresses(addrs []netip.Addr, hostname string) []schema.NodeAddress {
	sorted := slices.Clone(addrs)
	slices.SortFunc(sorted, func(x, y netip.Addr) int { return x.Compare(y) })
	sorted = slices.Compact(sorted)
	var out []schema.NodeAddress
	for _, ip := range sorted {
		out = append(out, schema.NodeAddress{Type: "InternalIP", Address: ip.String()})
	}
	if hostname != "" {
		out = append(out, schema.NodeAddress{Type: "Hostname", Address: hostname})
	}
	return out
}

// stamp sets each condition's Since: kept from the previous measurement
// while its status is unchanged, now when it changed.
func (a *Announcer) stamp(conds []schema.NodeCondition) []schema.NodeCondition {
	now := a.cfg.Clock().UTC().Truncate(time.Second)
	a.mu.Lock()
	defer a.mu.Unlock()
	for i, c := range conds {
		prev, ok := a.since[c.Type]
		if ok && prev.Status == c.Status {
			conds[i].Since = prev.Since
		} else {
			conds[i].Since = now
		}
		a.since[c.Type] = conds[i]
	}
	return conds
}

func readyCondition(rtErr error) schema.NodeCondition {
	if rtErr != nil {
		return schema.NodeCondition{Type: schema.NodeReady, Status: schema.ConditionFalse,
			Reason: "RuntimeUnreachable", Message: "container runtime: " + rtErr.Error()}
	}
	return schema.NodeCondition{Type: schema.NodeReady, Status: schema.ConditionTrue,
		Reason: "AgentReady", Message: "agent is connected to the container runtime"}
}

// diskCondition compares the data directory's free space with the
// threshold. Messages name the threshold, not the measured figure, so they
// stay equal while the status does.
func (a *Announcer) diskCondition() schema.NodeCondition {
	c := schema.NodeCondition{Type: schema.NodeDiskPressure}
	size, avail, err := a.host.disk(a.cfg.DataDir)
	if err != nil {
		c.Status, c.Reason, c.Message = schema.ConditionUnknown, "MeasureFailed", err.Error()
		return c
	}
	floor, ok := diskFloor(size, a.cfg.Thresholds)
	if ok && avail < floor {
		c.Status, c.Reason = schema.ConditionTrue, "DiskPressure"
		c.Message = fmt.Sprintf("free space on the filesystem of %s is below %s", a.cfg.DataDir, formatBytes(floor))
		return c
	}
	c.Status, c.Reason = schema.ConditionFalse, "SufficientDisk"
	c.Message = fmt.Sprintf("free space on the filesystem of %s is sufficient", a.cfg.DataDir)
	return c
}

// diskFloor is the smaller of the enabled disk thresholds for a filesystem
// of size bytes; ok is false when both are disabled.
func diskFloor(size int64, t Thresholds) (floor int64, ok bool) {
	if t.DiskMinFreePercent > 0 {
		floor, ok = int64(float64(size)*t.DiskMinFreePercent/100), true
	}
	if t.DiskMinFreeBytes > 0 && (!ok || t.DiskMinFreeBytes < floor) {
		floor, ok = t.DiskMinFreeBytes, true
	}
	return floor, ok
}

func (a *Announcer) memoryCondition() schema.NodeCondition {
	c := schema.NodeCondition{Type: schema.NodeMemoryPressure}
	_, avail, err := a.host.memory()
	switch floor := a.cfg.Thresholds.MemoryMinAvailable; {
	case err != nil:
		c.Status, c.Reason, c.Message = schema.ConditionUnknown, "MeasureFailed", err.Error()
	case floor > 0 && avail < floor:
		c.Status, c.Reason = schema.ConditionTrue, "MemoryPressure"
		c.Message = "available memory is below " + formatBytes(floor)
	default:
		c.Status, c.Reason, c.Message = schema.ConditionFalse, "SufficientMemory", "available memory is sufficient"
	}
	return c
}

func (a *Announcer) pidCondition() schema.NodeCondition {
	c := schema.NodeCondition{Type: schema.NodePIDPressure}
	used, limit, err := a.host.pids()
	switch pct := a.cfg.Thresholds.PIDMaxPercent; {
	case err != nil:
		c.Status, c.Reason, c.Message = schema.ConditionUnknown, "MeasureFailed", err.Error()
	case pct > 0 && limit > 0 && float64(used) >= float64(limit)*pct/100:
		c.Status, c.Reason = schema.ConditionTrue, "PIDPressure"
		c.Message = fmt.Sprintf("processes and threads use at least %g%% of kernel.pid_max", pct)
	default:
		c.Status, c.Reason, c.Message = schema.ConditionFalse, "SufficientPID", "PIDs are available"
	}
	return c
}

func networkCondition(addrs []netip.Addr, err error) schema.NodeCondition {
	c := schema.NodeCondition{Type: schema.NodeNetworkUnavailable}
	switch {
	case err != nil:
		c.Status, c.Reason, c.Message = schema.ConditionUnknown, "MeasureFailed", err.Error()
	case len(addrs) == 0:
		c.Status, c.Reason, c.Message = schema.ConditionTrue, "NoAddress", "no non-loopback interface is up with an address"
	default:
		c.Status, c.Reason, c.Message = schema.ConditionFalse, "InterfaceUp", "a non-loopback interface is up with an address"
	}
	return c
}

// formatBytes renders n in the largest binary unit it reaches: exactly
// when the unit divides it ("1Gi", "100Mi"), else to one decimal ("819.2Mi").
func formatBytes(n int64) string {
	for _, u := range []struct {
		suffix string
		size   int64
	}{{"Gi", 1 << 30}, {"Mi", 1 << 20}, {"Ki", 1 << 10}} {
		switch {
		case n >= u.size && n%u.size == 0:
			return strconv.FormatInt(n/u.size, 10) + u.suffix
		case n >= u.size:
			return strconv.FormatFloat(float64(n)/float64(u.size), 'f', 1, 64) + u.suffix
		}
	}
	return strconv.FormatInt(n, 10)
}
