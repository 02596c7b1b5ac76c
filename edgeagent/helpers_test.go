package edgeagent_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/edgeset/edgeset/edgeagent"
	"github.com/edgeset/edgeset/edgeagent/fake"
	"github.com/edgeset/edgeset/internal/checkfor"
	"github.com/edgeset/edgeset/schema"
)

const testNode = "gw-1"

// fakeClock is a settable clock.
type fakeClock struct {
	mu  sync.Mutex // guards now
	now time.Time
}

func newFakeClock() *fakeClock {
	return &fakeClock{now: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

type published struct {
	topic    string
	payload  []byte
	retained bool
}

// fakeConn records what the agent sends; Err, when set, fails every call.
type fakeConn struct {
	mu       sync.Mutex // guards Err, pubs, subs, subCalls, calls
	Err      error
	pubs     []published
	subs     map[string]bool
	subCalls map[string]int // SUBSCRIBEs per filter
	calls    int
}

func newFakeConn() *fakeConn { return &fakeConn{subs: map[string]bool{}, subCalls: map[string]int{}} }

func (c *fakeConn) Publish(ctx context.Context, topic string, payload []byte, retained bool) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls++
	if c.Err != nil {
		return c.Err
	}
	c.pubs = append(c.pubs, published{topic: topic, payload: append([]byte(nil), payload...), retained: retained})
	return nil
}

func (c *fakeConn) Subscribe(ctx context.Context, filter string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls++
	if c.Err != nil {
		return c.Err
	}
	c.subs[filter] = true
	c.subCalls[filter]++
	return nil
}

// subscriptions is how many times filter was subscribed to.
func (c *fakeConn) subscriptions(filter string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.subCalls[filter]
}

func (c *fakeConn) Unsubscribe(ctx context.Context, filter string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls++
	if c.Err != nil {
		return c.Err
	}
	delete(c.subs, filter)
	return nil
}

// newSession forgets everything recorded, as a new broker session would,
// and fails every later call with err when it is not nil.
func (c *fakeConn) newSession(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.Err, c.pubs, c.subs, c.subCalls, c.calls = err, nil, map[string]bool{}, map[string]int{}, 0
}

func (c *fakeConn) subscribed(filter string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.subs[filter]
}

func (c *fakeConn) callCount() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.calls
}

// published returns the messages sent on topic.
func (c *fakeConn) published(topic string) []published {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []published
	for _, p := range c.pubs {
		if p.topic == topic {
			out = append(out, p)
		}
	}
	return out
}

// countingRuntime counts reconcile passes through List.
type countingRuntime struct {
	*fake.Runtime
	lists         atomic.Int64
	subscriptions atomic.Int64 // calls to Events
}

func (r *countingRuntime) List(ctx context.Context, node string) ([]edgeagent.ContainerState, error) {
	r.lists.Add(1)
	return r.Runtime.List(ctx, node)
}

// harness runs one agent over a fake runtime, a fake connection and a fake
// clock.
type harness struct {
	t      *testing.T
	rt     *countingRuntime
	conn   *fakeConn
	clock  *fakeClock
	dir    string
	agent  *edgeagent.Agent
	cancel context.CancelFunc
	done   chan error
}

func newHarness(t *testing.T) *harness {
	rt := fake.New()
	rt.AddImage("busybox:1.36", "nginx:1.27", "busybox:1.37")
	return &harness{t: t, rt: &countingRuntime{Runtime: rt}, conn: newFakeConn(), clock: newFakeClock(), dir: t.TempDir()}
}

func (h *harness) config() edgeagent.Config {
	return edgeagent.Config{
		NodeName: testNode, DataDir: h.dir, Clock: h.clock.Now, ResyncInterval: 10 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
}

// start runs a new agent with cfg (from h.config, possibly modified).
func (h *harness) start(cfg edgeagent.Config) {
	h.t.Helper()
	a, err := edgeagent.New(cfg, h.rt, h.conn)
	require.NoError(h.t, err)
	edgeagent.SetProbeSecond(a, 5*time.Millisecond)
	ctx, cancel := context.WithCancel(context.Background())
	h.agent, h.cancel, h.done = a, cancel, make(chan error, 1)
	go func() { h.done <- a.Run(ctx) }()
	h.t.Cleanup(h.stop)
}

// stop ends the agent and checks Run returned cleanly; safe to call twice.
func (h *harness) stop() {
	if h.cancel == nil {
		return
	}
	h.cancel()
	h.cancel = nil
	select {
	case err := <-h.done:
		require.NoError(h.t, err)
	case <-time.After(10 * time.Second):
		h.t.Fatal("Run did not return after cancel")
	}
}

func (h *harness) connect() {
	h.t.Helper()
	require.NoError(h.t, h.agent.OnConnect(context.Background()))
}

func (h *harness) sendDesired(gen uint64, instances ...schema.DesiredInstance) {
	h.sendDesiredFor(testNode, gen, instances...)
}

func (h *harness) sendDesiredFor(node string, gen uint64, instances ...schema.DesiredInstance) {
	ds := schema.DesiredState{SchemaVersion: schema.WireVersion, Node: node, Generation: gen, Instances: instances}
	h.agent.HandleMessage(schema.NodeTopic(testNode, schema.TopicDesired), mustJSON(h.t, ds))
}

func (h *harness) sendRevision(rev schema.Revision) {
	h.agent.HandleMessage(schema.RevisionTopic(rev.Hash), mustJSON(h.t, rev))
}

// instance waits for the instance status of (ds, rev) that satisfies ok.
func (h *harness) waitInstance(ds, rev string, ok func(schema.InstanceStatus) error) schema.InstanceStatus {
	h.t.Helper()
	var got schema.InstanceStatus
	checkfor.Eventually(h.t, 5*time.Second, 5*time.Millisecond, func() error {
		st, found := h.instance(ds, rev)
		if !found {
			return fmt.Errorf("no status for %s %s", ds, rev)
		}
		got = st
		return ok(st)
	})
	return got
}

func (h *harness) instance(ds, rev string) (schema.InstanceStatus, bool) {
	obs, ok := h.agent.Observed()
	if !ok {
		return schema.InstanceStatus{}, false
	}
	for _, in := range obs.Instances {
		if in.DaemonSet == ds && in.Revision == rev {
			return in, true
		}
	}
	return schema.InstanceStatus{}, false
}

// publishedStatuses returns the published statuses of (ds, rev), oldest
// first.
func (h *harness) publishedStatuses(ds, rev string) []schema.InstanceStatus {
	h.t.Helper()
	var out []schema.InstanceStatus
	for _, p := range h.conn.published(schema.NodeTopic(testNode, schema.TopicObserved)) {
		var obs schema.ObservedState
		require.NoError(h.t, json.Unmarshal(p.payload, &obs))
		for _, in := range obs.Instances {
			if in.DaemonSet == ds && in.Revision == rev {
				out = append(out, in)
			}
		}
	}
	return out
}

// waitPasses waits until the agent has run n more reconcile passes.
func (h *harness) waitPasses(n int64) {
	h.t.Helper()
	target := h.rt.lists.Load() + n
	checkfor.Eventually(h.t, 5*time.Second, time.Millisecond, func() error {
		if h.rt.lists.Load() < target {
			return errors.New("passes pending")
		}
		return nil
	})
}

// managed returns this node's managed containers.
func (h *harness) managed() []edgeagent.ContainerState {
	list, err := h.rt.Runtime.List(context.Background(), testNode)
	require.NoError(h.t, err)
	return list
}

func phaseIs(phase string) func(schema.InstanceStatus) error {
	return func(st schema.InstanceStatus) error {
		if st.Phase != phase {
			return fmt.Errorf("phase %s (%s), want %s", st.Phase, st.Message, phase)
		}
		return nil
	}
}

// pendingWith waits for Pending with a message containing want: an
// instance is Pending "waiting for revision" first, then for its reason.
func pendingWith(want string) func(schema.InstanceStatus) error {
	return func(st schema.InstanceStatus) error {
		if st.Phase != schema.PhasePending || !strings.Contains(st.Message, want) {
			return fmt.Errorf("phase %s (%s), want %s with %q", st.Phase, st.Message, schema.PhasePending, want)
		}
		return nil
	}
}

func runningReady(st schema.InstanceStatus) error {
	if st.Phase != schema.PhaseRunning || !st.Ready {
		return fmt.Errorf("phase %s ready %v (%s), want Running and ready", st.Phase, st.Ready, st.Message)
	}
	return nil
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return b
}

func testTemplate(image string, mods ...func(*schema.PodSpec)) schema.PodTemplateSpec {
	t := schema.PodTemplateSpec{Spec: schema.PodSpec{Containers: []schema.Container{{Name: "main", Image: image}}}}
	for _, m := range mods {
		m(&t.Spec)
	}
	return t
}

func testRevision(ds string, t schema.PodTemplateSpec) schema.Revision {
	return schema.Revision{SchemaVersion: schema.WireVersion, Hash: schema.TemplateHash(t), DaemonSet: ds, Number: 1, Template: t}
}

func want(rev schema.Revision) schema.DesiredInstance {
	return schema.DesiredInstance{DaemonSet: rev.DaemonSet, Revision: rev.Hash}
}

// healthServer answers /ready with 200 once ready is set, 503 before.
type healthServer struct {
	port  int
	ready atomic.Bool
}

func newHealthServer(t *testing.T) *healthServer {
	s := &healthServer{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !s.ready.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	t.Cleanup(srv.Close)
	s.port = srv.Listener.Addr().(*net.TCPAddr).Port
	return s
}

func (r *countingRuntime) Events(ctx context.Context) (<-chan edgeagent.RuntimeEvent, <-chan error) {
	r.subscriptions.Add(1)
	return r.Runtime.Events(ctx)
}
