package ui

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/edgeset/edgeset/controller/api"
	"github.com/edgeset/edgeset/controller/telemetry"
	"github.com/edgeset/edgeset/schema"
)

// fakeBackend is an in-memory Backend; its fields may be changed under mu.
type fakeBackend struct {
	mu       sync.Mutex
	nodes    []api.Node
	dss      []api.DaemonSet
	events   []api.Event
	revs     map[string][]api.Revision
	patches  []nodePatchCall
	rollouts []api.RolloutRequest
	logs     func(context.Context, api.LogsRequest) (io.ReadCloser, error)
}

type nodePatchCall struct {
	Node  string
	Patch api.NodePatch
}

var _ Backend = (*fakeBackend)(nil)

func (f *fakeBackend) ListDaemonSets(context.Context) ([]api.DaemonSet, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.dss), nil
}

func (f *fakeBackend) GetDaemonSet(_ context.Context, key string) (api.DaemonSet, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, d := range f.dss {
		if d.Key() == key {
			return d, nil
		}
	}
	return api.DaemonSet{}, fmt.Errorf("daemonset %s: %w", key, api.ErrNotFound)
}

func (f *fakeBackend) ListNodes(context.Context) ([]api.Node, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.nodes), nil
}

func (f *fakeBackend) GetNode(_ context.Context, name string) (api.Node, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, n := range f.nodes {
		if n.Name == name {
			return n, nil
		}
	}
	return api.Node{}, fmt.Errorf("%w: node %q", api.ErrNotFound, name)
}

func (f *fakeBackend) UpdateNode(_ context.Context, name string, patch api.NodePatch) (api.Node, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.patches = append(f.patches, nodePatchCall{name, patch})
	for i, n := range f.nodes {
		if n.Name == name {
			if patch.Unschedulable != nil {
				f.nodes[i].Unschedulable = *patch.Unschedulable
			}
			return f.nodes[i], nil
		}
	}
	return api.Node{}, fmt.Errorf("%w: node %q", api.ErrNotFound, name)
}

func (f *fakeBackend) Rollout(_ context.Context, key string, req api.RolloutRequest) (api.DaemonSet, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rollouts = append(f.rollouts, req)
	for i, d := range f.dss {
		if d.Key() == key {
			if req.Action == api.RolloutPause {
				f.dss[i].Status.Rollout.Paused = true
			}
			return f.dss[i], nil
		}
	}
	return api.DaemonSet{}, fmt.Errorf("daemonset %s: %w", key, api.ErrNotFound)
}

func (f *fakeBackend) RolloutHistory(_ context.Context, key string) ([]api.Revision, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.revs[key]), nil
}

func (f *fakeBackend) Events(_ context.Context, flt api.EventFilter) ([]api.Event, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []api.Event
	for _, e := range f.events {
		if e.Seq > flt.SinceSeq && (flt.Object == "" || e.Object == flt.Object) {
			out = append(out, e)
		}
	}
	if flt.Limit > 0 && len(out) > flt.Limit {
		out = out[len(out)-flt.Limit:]
	}
	return out, nil
}

func (f *fakeBackend) addEvent(e api.Event) {
	f.mu.Lock()
	defer f.mu.Unlock()
	e.Seq = uint64(len(f.events) + 1)
	f.events = append(f.events, e)
}

func (f *fakeBackend) Logs(ctx context.Context, req api.LogsRequest) (io.ReadCloser, error) {
	if f.logs != nil {
		return f.logs(ctx, req)
	}
	return io.NopCloser(strings.NewReader("")), nil
}

func (f *fakeBackend) Version(context.Context) api.VersionInfo {
	return api.VersionInfo{Version: "test", Broker: "embedded"}
}

// secretValue is an env value of the fake's daemonset: no page may show
// it.
const secretValue = "s3cret-env-value-never-shown"

// fakeTelemetry is a report with three points of history, the last
// without a temperature.
func fakeTelemetry(now time.Time) *telemetry.Node {
	free := int64(20 << 30)
	temp := 51.5
	pt := func(ago time.Duration, load float64, t *float64) telemetry.Point {
		return telemetry.Point{Time: now.Add(-ago), Load1: load, MemoryAvailableBytes: 2 << 30, DataFreeBytes: &free, TemperatureCelsius: t}
	}
	return &telemetry.Node{Received: now.Add(-10 * time.Second),
		Latest: schema.Telemetry{Load1: 0.75, CPUs: 4, MemoryTotalBytes: 4 << 30, MemoryAvailableBytes: 2 << 30, UptimeSeconds: 7200,
			Disks:     []schema.DiskUsage{{Name: schema.DiskData, Path: "/var/lib/edgeset", SizeBytes: 32 << 30, FreeBytes: free}},
			Instances: []schema.InstanceUsage{{DaemonSet: "monitoring/exporter", CPUPercent: 12.5, MemoryBytes: 30 << 20}}},
		History: []telemetry.Point{pt(2*time.Minute, 0.25, &temp), pt(time.Minute, 1.5, &temp), pt(0, 0.75, nil)}}
}

// newFake returns a small fleet: nodes gw-0 ... gw-(n-1) over sites a, b
// and c, every third offline, gw-1 not ready, gw-2 cordoned and reporting
// telemetry; one
// daemonset mid-rollout on the online ones.
func newFake(n int, now time.Time) *fakeBackend {
	f := &fakeBackend{revs: map[string][]api.Revision{}}
	seen := now.Add(-time.Minute)
	for i := range n {
		node := api.Node{Node: schema.Node{
			Name:       fmt.Sprintf("gw-%d", i),
			Labels:     map[string]string{"site": string(rune('a' + i%3)), "role": []string{"gateway", "camera"}[i%2]},
			Conditions: []schema.NodeCondition{{Type: schema.NodeReady, Status: schema.ConditionTrue}},
			Info:       schema.NodeInfo{AgentVersion: fmt.Sprintf("v1.%d", i%4), OS: "linux", Arch: "arm64"},
			Capacity:   schema.ResourceList{"cpu": "4"},
		}, Online: i%3 != 0, LastSeen: &seen}
		if i == 1 {
			node.Conditions[0].Status = schema.ConditionFalse
		}
		if i == 2 {
			node.Unschedulable = true
			node.Telemetry = fakeTelemetry(now)
		}
		f.nodes = append(f.nodes, node)
	}
	ds := api.DaemonSet{Namespace: "monitoring", Name: "exporter", CurrentRevision: 2, CurrentHash: "h2",
		Manifest: schema.DaemonSet{Spec: schema.DaemonSetSpec{Template: schema.PodTemplateSpec{Spec: schema.PodSpec{
			Containers: []schema.Container{{Name: "exporter", Image: "registry.local/exporter:2",
				Env: []schema.EnvVar{{Name: "PASSWORD", Value: secretValue}}}}}}}},
		Status: api.DaemonSetStatus{DesiredNumberScheduled: n, UpdatedNumberScheduled: 1,
			Rollout: &api.RolloutStatus{Strategy: "RollingUpdate", Total: n, Updated: 1, Updating: 1, Waiting: n - 2, MaxUnavailable: 1}}}
	for i := range n {
		in := api.Instance{Node: fmt.Sprintf("gw-%d", i), DaemonSet: ds.Key(), Revision: "h1", Phase: schema.PhaseRunning, Ready: true, Online: i%3 != 0}
		if i == 1 {
			in.Revision, in.Ready = "h2", false
		}
		if i == 4 {
			in.Revision = "h2"
		}
		ds.Instances = append(ds.Instances, in)
		f.nodes[i].Instances = []api.Instance{in}
		f.nodes[i].Placement = []api.Placement{{Node: in.Node, DaemonSet: ds.Key(), Run: true, Reasons: []string{"matches nodeSelector"}}}
	}
	f.dss = []api.DaemonSet{ds}
	// The controller lists nodes by name.
	slices.SortFunc(f.nodes, func(a, b api.Node) int { return strings.Compare(a.Name, b.Name) })
	f.revs[ds.Key()] = []api.Revision{{Number: 1, Hash: "h1", Images: []string{"registry.local/exporter:1"}}, {Number: 2, Hash: "h2", Current: true, Images: []string{"registry.local/exporter:2"}}}
	f.addEvent(api.Event{Time: now, Type: schema.EventWarning, Reason: "BackOff", Object: "node/gw-1", Source: "gw-1", Message: "pull failed"})
	f.addEvent(api.Event{Time: now, Type: schema.EventNormal, Reason: "RolloutStarted", Object: "daemonset/" + ds.Key(), Message: "revision 2"})
	return f
}
