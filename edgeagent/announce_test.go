package edgeagent

import (
	"context"
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/edgeset/edgeset/schema"
)

// fakeHost is a hostProbe with settable figures; the zero value is a
// healthy device with 4 GiB of RAM, a 100 GiB disk and one address.
type fakeHost struct {
	mu                  sync.Mutex // guards everything below
	memTotal, memAvail  int64
	memErr              error
	diskSize, diskAvail int64
	diskErr             error
	pidUsed, pidLimit   int64
	pidErr              error
	addrs               []netip.Addr
	addrErr             error
	kernel              string
	diskPaths           []string
}

var _ hostProbe = (*fakeHost)(nil)

func newFakeHost() *fakeHost {
	return &fakeHost{
		memTotal: 4 << 30, memAvail: 2 << 30,
		diskSize: 100 << 30, diskAvail: 50 << 30,
		pidUsed: 300, pidLimit: 4194304,
		addrs:  []netip.Addr{netip.MustParseAddr("192.168.1.20")},
		kernel: "6.8.0-test",
	}
}

func (h *fakeHost) memory() (int64, int64, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.memTotal, h.memAvail, h.memErr
}

func (h *fakeHost) disk(path string) (int64, int64, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.diskPaths = append(h.diskPaths, path)
	return h.diskSize, h.diskAvail, h.diskErr
}

func (h *fakeHost) pids() (int64, int64, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.pidUsed, h.pidLimit, h.pidErr
}

func (h *fakeHost) addresses() ([]netip.Addr, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.addrs, h.addrErr
}

func (h *fakeHost) kernelVersion() string { return h.kernel }

// infoRuntime answers Info only; the Announcer calls nothing else.
type infoRuntime struct {
	Runtime
	err error
}

func (r infoRuntime) Info(context.Context) (RuntimeInfo, error) {
	if r.err != nil {
		return RuntimeInfo{}, r.err
	}
	return RuntimeInfo{Name: "docker", Version: "27.3.1"}, nil
}

func conditionOf(st schema.NodeStatus, typ string) schema.NodeCondition {
	for _, c := range st.Conditions {
		if c.Type == typ {
			return c
		}
	}
	return schema.NodeCondition{}
}

func TestAnnouncerStatusFields(t *testing.T) {
	host := newFakeHost()
	host.addrs = []netip.Addr{netip.MustParseAddr("10.0.0.7"), netip.MustParseAddr("192.168.1.20"), netip.MustParseAddr("10.0.0.7")}
	taints := []schema.Taint{{Key: "dedicated", Value: "camera", Effect: schema.TaintNoSchedule}}
	a, err := newAnnouncer(AnnounceConfig{
		NodeName: "gw-1", Hostname: "GW-1", DataDir: "/var/lib/edgeset-agent",
		Labels: map[string]string{"site": "berlin-3", "topology.kubernetes.io/zone": "eu"},
		Taints: taints,
	}, infoRuntime{}, host)
	require.NoError(t, err)

	st := a.Status(context.Background())
	require.Equal(t, map[string]string{
		"site": "berlin-3", "topology.kubernetes.io/zone": "eu",
		schema.LabelHostname: "gw-1", schema.LabelOS: runtime.GOOS, schema.LabelArch: runtime.GOARCH,
		schema.LabelAgentVersion: schema.Version, schema.LabelRuntime: "docker", schema.LabelPrefetch: "true",
	}, st.Labels)
	require.Equal(t, taints, st.Taints)
	require.Equal(t, schema.ResourceList{"cpu": schema.Quantity(strconv.Itoa(runtime.NumCPU())), "memory": "4194304Ki"}, st.Capacity)
	require.Equal(t, []schema.NodeAddress{
		{Type: "InternalIP", Address: "10.0.0.7"}, {Type: "InternalIP", Address: "192.168.1.20"}, {Type: "Hostname", Address: "GW-1"},
	}, st.Addresses)
	require.Equal(t, schema.NodeInfo{OS: runtime.GOOS, Arch: runtime.GOARCH, Hostname: "GW-1", KernelVersion: "6.8.0-test",
		AgentVersion: schema.Version, Runtime: "docker", RuntimeVersion: "27.3.1"}, st.Info)
	require.Equal(t, []string{"/var/lib/edgeset-agent"}, host.diskPaths)

	b, err := schema.Encode(st)
	require.NoError(t, err)
	_, err = schema.DecodeNodeStatus(b)
	require.NoError(t, err, "the status must pass the controller's validation")
}

func TestAnnouncerConditions(t *testing.T) {
	unreachable := errors.New("dial unix /var/run/docker.sock: connect: no such file or directory")
	cases := []struct {
		name   string
		thr    Thresholds
		rtErr  error
		tweak  func(h *fakeHost)
		typ    string
		status string
		reason string
	}{
		{name: "ready", typ: schema.NodeReady, status: schema.ConditionTrue, reason: "AgentReady"},
		{name: "runtime unreachable", rtErr: unreachable, typ: schema.NodeReady, status: schema.ConditionFalse, reason: "RuntimeUnreachable"},
		{name: "disk plenty", typ: schema.NodeDiskPressure, status: schema.ConditionFalse},
		{name: "disk under 1Gi on a big disk", tweak: func(h *fakeHost) { h.diskAvail = 1<<30 - 1 },
			typ: schema.NodeDiskPressure, status: schema.ConditionTrue},
		{name: "disk 5% of big disk is not pressure", tweak: func(h *fakeHost) { h.diskAvail = 5 << 30 },
			typ: schema.NodeDiskPressure, status: schema.ConditionFalse},
		{name: "small disk under 10%", tweak: func(h *fakeHost) { h.diskSize, h.diskAvail = 4<<30, 400<<20 },
			typ: schema.NodeDiskPressure, status: schema.ConditionTrue},
		{name: "small disk over 10% but under 1Gi", tweak: func(h *fakeHost) { h.diskSize, h.diskAvail = 4<<30, 500<<20 },
			typ: schema.NodeDiskPressure, status: schema.ConditionFalse},
		{name: "disk percent only", thr: Thresholds{DiskMinFreeBytes: -1}, tweak: func(h *fakeHost) { h.diskAvail = 5 << 30 },
			typ: schema.NodeDiskPressure, status: schema.ConditionTrue},
		{name: "disk thresholds disabled", thr: Thresholds{DiskMinFreeBytes: -1, DiskMinFreePercent: -1}, tweak: func(h *fakeHost) { h.diskAvail = 0 },
			typ: schema.NodeDiskPressure, status: schema.ConditionFalse},
		{name: "disk unmeasurable", tweak: func(h *fakeHost) { h.diskErr = errors.New("statfs: no such file") },
			typ: schema.NodeDiskPressure, status: schema.ConditionUnknown, reason: "MeasureFailed"},
		{name: "memory plenty", typ: schema.NodeMemoryPressure, status: schema.ConditionFalse},
		{name: "memory under 100Mi", tweak: func(h *fakeHost) { h.memAvail = 100<<20 - 1 },
			typ: schema.NodeMemoryPressure, status: schema.ConditionTrue, reason: "MemoryPressure"},
		{name: "memory at 100Mi", tweak: func(h *fakeHost) { h.memAvail = 100 << 20 },
			typ: schema.NodeMemoryPressure, status: schema.ConditionFalse},
		{name: "memory custom threshold", thr: Thresholds{MemoryMinAvailable: 3 << 30},
			typ: schema.NodeMemoryPressure, status: schema.ConditionTrue},
		{name: "memory unmeasurable", tweak: func(h *fakeHost) { h.memErr = errors.New("no meminfo") },
			typ: schema.NodeMemoryPressure, status: schema.ConditionUnknown},
		{name: "pids plenty", typ: schema.NodePIDPressure, status: schema.ConditionFalse},
		{name: "pids at 90%", tweak: func(h *fakeHost) { h.pidUsed, h.pidLimit = 900, 1000 },
			typ: schema.NodePIDPressure, status: schema.ConditionTrue, reason: "PIDPressure"},
		{name: "pids under 90%", tweak: func(h *fakeHost) { h.pidUsed, h.pidLimit = 899, 1000 },
			typ: schema.NodePIDPressure, status: schema.ConditionFalse},
		{name: "network up", typ: schema.NodeNetworkUnavailable, status: schema.ConditionFalse},
		{name: "no address", tweak: func(h *fakeHost) { h.addrs = nil },
			typ: schema.NodeNetworkUnavailable, status: schema.ConditionTrue, reason: "NoAddress"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			host := newFakeHost()
			if tc.tweak != nil {
				tc.tweak(host)
			}
			a, err := newAnnouncer(AnnounceConfig{NodeName: "gw-1", Thresholds: tc.thr}, infoRuntime{err: tc.rtErr}, host)
			require.NoError(t, err)
			st := a.Status(context.Background())
			require.Len(t, st.Conditions, 5)
			c := conditionOf(st, tc.typ)
			require.Equal(t, tc.status, c.Status, "%s: %s", c.Reason, c.Message)
			if tc.reason != "" {
				require.Equal(t, tc.reason, c.Reason)
			}
			require.NotEmpty(t, c.Message)
			require.False(t, c.Since.IsZero())
		})
	}
}

func TestAnnouncerSinceStableUntilStatusChanges(t *testing.T) {
	host := newFakeHost()
	now := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	var clockMu sync.Mutex
	clock := func() time.Time { clockMu.Lock(); defer clockMu.Unlock(); return now }
	advance := func(d time.Duration) { clockMu.Lock(); now = now.Add(d); clockMu.Unlock() }
	a, err := newAnnouncer(AnnounceConfig{NodeName: "gw-1", Clock: clock}, infoRuntime{}, host)
	require.NoError(t, err)
	ctx := context.Background()

	first := a.Status(ctx)
	advance(time.Minute)
	host.mu.Lock()
	host.memAvail -= 10 << 20 // a different figure, the same status
	host.diskAvail -= 1 << 20
	host.mu.Unlock()
	second := a.Status(ctx)
	require.Equal(t, first, second, "an unchanged device must announce an identical status")

	advance(time.Minute)
	host.mu.Lock()
	host.memAvail = 1 << 20
	host.mu.Unlock()
	third := a.Status(ctx)
	mem := conditionOf(third, schema.NodeMemoryPressure)
	require.Equal(t, schema.ConditionTrue, mem.Status)
	require.Equal(t, now, mem.Since, "a changed condition is stamped now")
	require.Equal(t, conditionOf(first, schema.NodeReady).Since, conditionOf(third, schema.NodeReady).Since,
		"an unchanged condition keeps its Since")

	advance(time.Minute)
	fourth := a.Status(ctx)
	require.Equal(t, third, fourth)
}

func TestAnnouncerConfigErrors(t *testing.T) {
	cases := []struct {
		name   string
		cfg    AnnounceConfig
		wantIn []string
	}{
		{name: "automatic label", cfg: AnnounceConfig{NodeName: "gw-1", Labels: map[string]string{schema.LabelArch: "riscv"}},
			wantIn: []string{`"kubernetes.io/arch" is set by the agent`}},
		{name: "runtime label", cfg: AnnounceConfig{NodeName: "gw-1", Labels: map[string]string{schema.LabelRuntime: "x"}},
			wantIn: []string{`"edgeset.io/runtime"`}},
		{name: "bad label value", cfg: AnnounceConfig{NodeName: "gw-1", Labels: map[string]string{"site": "no spaces"}},
			wantIn: []string{"site", "no spaces"}},
		{name: "bad taint effect", cfg: AnnounceConfig{NodeName: "gw-1", Taints: []schema.Taint{{Key: "k", Effect: "Sometimes"}}},
			wantIn: []string{"taints[0].effect", "Sometimes"}},
		{name: "bad node name", cfg: AnnounceConfig{NodeName: "GW_1"}, wantIn: []string{"GW_1"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := newAnnouncer(tc.cfg, infoRuntime{}, newFakeHost())
			require.Error(t, err)
			for _, s := range tc.wantIn {
				require.Contains(t, err.Error(), s)
			}
		})
	}
}

func TestHostnameLabel(t *testing.T) {
	cases := []struct{ name, hostname, node, want string }{
		{"lowercased", "Gateway-7", "gw-7", "gateway-7"},
		{"too long falls back to node", strings.Repeat("h", 64), "gw-7", "gw-7"},
		{"invalid falls back to node", "bad host", "gw-7", "gw-7"},
		{"neither valid", "bad host", strings.Repeat("n", 70), ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, hostnameLabel(tc.hostname, tc.node))
		})
	}
}

func TestFormatBytes(t *testing.T) {
	cases := []struct {
		n    int64
		want string
	}{{1 << 30, "1Gi"}, {100 << 20, "100Mi"}, {429496729, "409.6Mi"}, {512, "512"}, {3 << 10, "3Ki"}}
	for _, tc := range cases {
		t.Run(tc.want, func(t *testing.T) { require.Equal(t, tc.want, formatBytes(tc.n)) })
	}
}

func TestParseMeminfo(t *testing.T) {
	cases := []struct {
		name         string
		in           string
		total, avail int64
		err          string
	}{
		{name: "ok", in: "MemTotal:        8000000 kB\nMemFree:  100 kB\nMemAvailable:    4000000 kB\n", total: 8000000 * 1024, avail: 4000000 * 1024},
		{name: "no available (kernel < 3.14)", in: "MemTotal: 10 kB\nMemFree: 5 kB\n", err: "no MemAvailable"},
		{name: "garbage", in: "MemTotal: lots kB\nMemAvailable: 1 kB\n", err: "MemTotal"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			total, avail, err := parseMeminfo([]byte(tc.in))
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.total, total)
			require.Equal(t, tc.avail, avail)
		})
	}
}

func TestParseLoadavgEntities(t *testing.T) {
	cases := []struct {
		in   string
		want int64
		err  bool
	}{{"0.52 0.58 0.59 3/1187 123456\n", 1187, false}, {"0.52 0.58 0.59 3\n", 0, true}, {"0.1 0.2", 0, true}}
	for _, tc := range cases {
		t.Run(tc.in, func(t *testing.T) {
			got, err := parseLoadavgEntities(tc.in)
			require.Equal(t, tc.err, err != nil, "err %v", err)
			require.Equal(t, tc.want, got)
		})
	}
}

func TestProcHostReadsFiles(t *testing.T) {
	root := t.TempDir()
	write := func(rel, content string) {
		p := filepath.Join(root, rel)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(content), 0o644))
	}
	write("proc/meminfo", "MemTotal: 2048 kB\nMemAvailable: 1024 kB\n")
	write("proc/loadavg", "0.00 0.01 0.05 1/250 999\n")
	write("proc/sys/kernel/pid_max", "32768\n")
	write("proc/sys/kernel/osrelease", "6.1.0-rpi7\n")
	h := procHost{root: root}

	total, avail, err := h.memory()
	require.NoError(t, err)
	require.Equal(t, [2]int64{2 << 20, 1 << 20}, [2]int64{total, avail})
	used, limit, err := h.pids()
	require.NoError(t, err)
	require.Equal(t, [2]int64{250, 32768}, [2]int64{used, limit})
	require.Equal(t, "6.1.0-rpi7", h.kernelVersion())
	size, free, err := h.disk(root)
	require.NoError(t, err)
	require.Positive(t, size)
	require.LessOrEqual(t, free, size)
	_, _, err = h.disk(filepath.Join(root, "missing"))
	require.ErrorContains(t, err, "missing")
}
