package docker_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"
	"github.com/stretchr/testify/require"

	"github.com/edgeset/edgeset/edgeagent"
	"github.com/edgeset/edgeset/edgeagent/docker"
	"github.com/edgeset/edgeset/internal/checkfor"
	"github.com/edgeset/edgeset/schema"
	"github.com/edgeset/edgeset/test/testimage"
)

// Timeouts of the agent tests: generous, the engine is shared with other
// test runs on two cores. Nothing asserts how long anything took.
const (
	agentWait = 45 * time.Second
	agentPoll = 20 * time.Millisecond
)

// recordingConn is the agent's MQTT connection without a broker: it records
// what the agent sends; err, when set, fails every call.
type recordingConn struct {
	mu    sync.Mutex // guards err, pubs, subs, calls
	err   error
	pubs  []publication
	subs  map[string]bool
	calls int
}

type publication struct {
	topic    string
	payload  []byte
	retained bool
}

var _ edgeagent.Conn = (*recordingConn)(nil)

// newRecordingConn returns a connection whose calls fail with err (nil:
// every call succeeds).
func newRecordingConn(err error) *recordingConn {
	return &recordingConn{err: err, subs: map[string]bool{}}
}

func (c *recordingConn) Publish(_ context.Context, topic string, payload []byte, retained bool) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls++
	if c.err != nil {
		return c.err
	}
	c.pubs = append(c.pubs, publication{topic: topic, payload: slices.Clone(payload), retained: retained})
	return nil
}

func (c *recordingConn) Subscribe(_ context.Context, filter string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls++
	if c.err != nil {
		return c.err
	}
	c.subs[filter] = true
	return nil
}

func (c *recordingConn) Unsubscribe(_ context.Context, filter string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls++
	if c.err != nil {
		return c.err
	}
	delete(c.subs, filter)
	return nil
}

// published returns the payloads sent on topic, oldest first.
func (c *recordingConn) published(topic string) []publication {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []publication
	for _, p := range c.pubs {
		if p.topic == topic {
			out = append(out, p)
		}
	}
	return out
}

func (c *recordingConn) callCount() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.calls
}

// countingRuntime is the Docker runtime counting reconcile passes (through
// List), container creations and removals.
type countingRuntime struct {
	*docker.Runtime
	lists   atomic.Int64
	creates atomic.Int64
	removes atomic.Int64
}

func (r *countingRuntime) Remove(ctx context.Context, id string) error {
	r.removes.Add(1)
	return r.Runtime.Remove(ctx, id)
}

func (r *countingRuntime) List(ctx context.Context, node string) ([]edgeagent.ContainerState, error) {
	r.lists.Add(1)
	return r.Runtime.List(ctx, node)
}

func (r *countingRuntime) Create(ctx context.Context, spec edgeagent.ContainerSpec) (string, error) {
	r.creates.Add(1)
	return r.Runtime.Create(ctx, spec)
}

// agentHarness runs edgeagent.Agent over the real Docker runtime for a node
// of its own, with a recording connection and a data dir that outlives
// each agent it starts.
type agentHarness struct {
	t      *testing.T
	e      env // the Docker runtime, a raw client, the test image, the node
	rt     *countingRuntime
	conn   *recordingConn
	dir    string
	agent  *edgeagent.Agent
	cancel context.CancelFunc
	done   chan error
}

// newAgentHarness connects to the engine (skipping without one), builds the
// test image and reserves a node whose containers are removed at cleanup,
// after the agent has stopped.
func newAgentHarness(t *testing.T) *agentHarness {
	t.Helper()
	return newAgentHarnessOn(t, setup(t))
}

// newAgentHarnessOn is newAgentHarness on the engine, image and node of e
// (a private engine's, say).
func newAgentHarnessOn(t *testing.T, e env) *agentHarness {
	t.Helper()
	return &agentHarness{t: t, e: e, rt: &countingRuntime{Runtime: e.rt}, conn: newRecordingConn(nil), dir: t.TempDir()}
}

// config is an agent configuration with short resync and backoff periods.
func (h *agentHarness) config() edgeagent.Config {
	return agentConfig(h.e.node, h.dir, slog.New(slog.NewTextHandler(h.t.Output(), nil)))
}

func agentConfig(node, dir string, log *slog.Logger) edgeagent.Config {
	return edgeagent.Config{
		NodeName:       node,
		DataDir:        dir,
		Logger:         log,
		ResyncInterval: 250 * time.Millisecond,
		RestartBackoff: edgeagent.Backoff{Initial: 200 * time.Millisecond, Max: 2 * time.Second, ResetAfter: time.Minute},
		EventsRetry:    edgeagent.Backoff{Initial: 100 * time.Millisecond, Max: time.Second, ResetAfter: time.Minute},
		ConnTimeout:    5 * time.Second,
	}
}

// start runs a new agent on h's data dir and runtime; stop (or cleanup)
// ends it.
func (h *agentHarness) start(cfg edgeagent.Config) {
	h.t.Helper()
	a, err := edgeagent.New(cfg, h.rt, h.conn)
	require.NoError(h.t, err)
	ctx, cancel := context.WithCancel(context.Background())
	h.agent, h.cancel, h.done = a, cancel, make(chan error, 1)
	go func() { h.done <- a.Run(ctx) }()
	h.t.Cleanup(h.stop)
}

// stop cancels the agent and checks that Run returned cleanly; it is safe
// to call twice.
func (h *agentHarness) stop() {
	h.t.Helper()
	if h.cancel == nil {
		return
	}
	h.cancel()
	h.cancel = nil
	select {
	case err := <-h.done:
		require.NoError(h.t, err, "Run")
	case <-time.After(agentWait):
		h.t.Fatal("Run did not return after cancel")
	}
}

func (h *agentHarness) connect() {
	h.t.Helper()
	require.NoError(h.t, h.agent.OnConnect(context.Background()))
}

// apply delivers a desired state of generation gen with one instance per
// revision, then the revisions, as the controller's retained messages
// would arrive.
func (h *agentHarness) apply(gen uint64, revs ...schema.Revision) {
	h.t.Helper()
	deliver(h.t, h.agent, h.e.node, gen, revs...)
}

// deliver hands a desired state and its revisions to a.HandleMessage.
func deliver(t *testing.T, a *edgeagent.Agent, node string, gen uint64, revs ...schema.Revision) {
	t.Helper()
	ds := schema.DesiredState{SchemaVersion: schema.WireVersion, Node: node, Generation: gen, Instances: []schema.DesiredInstance{}}
	for _, r := range revs {
		ds.Instances = append(ds.Instances, schema.DesiredInstance{DaemonSet: r.DaemonSet, Revision: r.Hash})
	}
	a.HandleMessage(schema.NodeTopic(node, schema.TopicDesired), mustJSON(t, ds))
	for _, r := range revs {
		a.HandleMessage(schema.RevisionTopic(r.Hash), mustJSON(t, r))
	}
}

// waitInstance polls the agent's observed state until the status of rev's
// instance satisfies ok, and returns it.
func (h *agentHarness) waitInstance(rev schema.Revision, ok func(schema.InstanceStatus) error) schema.InstanceStatus {
	h.t.Helper()
	return waitInstance(h.t, h.agent, rev, ok)
}

func waitInstance(t *testing.T, a *edgeagent.Agent, rev schema.Revision, ok func(schema.InstanceStatus) error) schema.InstanceStatus {
	t.Helper()
	var got schema.InstanceStatus
	checkfor.Eventually(t, agentWait, agentPoll, func() error {
		st, found := instanceOf(a, rev)
		if !found {
			return fmt.Errorf("no status for %s revision %s", rev.DaemonSet, rev.Hash)
		}
		got = st
		return ok(st)
	})
	return got
}

func instanceOf(a *edgeagent.Agent, rev schema.Revision) (schema.InstanceStatus, bool) {
	obs, ok := a.Observed()
	if !ok {
		return schema.InstanceStatus{}, false
	}
	for _, in := range obs.Instances {
		if in.DaemonSet == rev.DaemonSet && in.Revision == rev.Hash {
			return in, true
		}
	}
	return schema.InstanceStatus{}, false
}

// waitPasses waits until the agent has listed the engine n more times, that
// is run n more reconcile passes.
func (h *agentHarness) waitPasses(n int64) {
	h.t.Helper()
	target := h.rt.lists.Load() + n
	checkfor.Eventually(h.t, agentWait, agentPoll, func() error {
		if got := h.rt.lists.Load(); got < target {
			return fmt.Errorf("%d passes of %d", got, target)
		}
		return nil
	})
}

// observedHistory decodes every observed state published, oldest first.
func (h *agentHarness) observedHistory() []schema.ObservedState {
	h.t.Helper()
	var out []schema.ObservedState
	for _, p := range h.conn.published(schema.NodeTopic(h.e.node, schema.TopicObserved)) {
		var obs schema.ObservedState
		require.NoError(h.t, json.Unmarshal(p.payload, &obs))
		require.True(h.t, p.retained, "observed state is published retained")
		out = append(out, obs)
	}
	return out
}

// publishedStatuses returns the published statuses of rev's instance,
// oldest first.
func (h *agentHarness) publishedStatuses(rev schema.Revision) []schema.InstanceStatus {
	h.t.Helper()
	var out []schema.InstanceStatus
	for _, obs := range h.observedHistory() {
		for _, in := range obs.Instances {
			if in.DaemonSet == rev.DaemonSet && in.Revision == rev.Hash {
				out = append(out, in)
			}
		}
	}
	return out
}

// waitEvent waits for a published NodeEvent with reason and returns it.
func (h *agentHarness) waitEvent(reason string) schema.NodeEvent {
	h.t.Helper()
	var ev schema.NodeEvent
	checkfor.Eventually(h.t, agentWait, agentPoll, func() error {
		for _, p := range h.conn.published(schema.NodeTopic(h.e.node, schema.TopicEvents)) {
			if err := json.Unmarshal(p.payload, &ev); err != nil {
				return err
			}
			if ev.Reason == reason {
				return nil
			}
		}
		return fmt.Errorf("no %s event published", reason)
	})
	return ev
}

// managed lists the engine's managed containers of node, asking the engine
// directly rather than the runtime under test.
func managed(t *testing.T, cli *client.Client, node string) []container.Summary {
	t.Helper()
	res, err := cli.ContainerList(t.Context(), client.ContainerListOptions{
		All: true,
		Filters: make(client.Filters).Add("label",
			edgeagent.LabelManaged+"=true", edgeagent.LabelNode+"="+node),
	})
	require.NoError(t, err)
	return res.Items
}

// waitManaged polls until the node's managed containers satisfy ok and
// returns them.
func (h *agentHarness) waitManaged(ok func([]container.Summary) error) []container.Summary {
	h.t.Helper()
	var list []container.Summary
	checkfor.Eventually(h.t, agentWait, agentPoll, func() error {
		list = managed(h.t, h.e.cli, h.e.node)
		return ok(list)
	})
	return list
}

// onlyRevisions accepts exactly one container per given instance (daemonset
// and revision) and no other container.
func onlyRevisions(revs ...schema.Revision) func([]container.Summary) error {
	return func(list []container.Summary) error {
		want := map[[2]string]bool{}
		for _, r := range revs {
			want[[2]string{r.DaemonSet, r.Hash}] = true
		}
		seen := map[[2]string]int{}
		for _, c := range list {
			k := [2]string{c.Labels[edgeagent.LabelDaemonSet], c.Labels[edgeagent.LabelRevision]}
			if !want[k] {
				return fmt.Errorf("container %s of %s revision %s not desired", c.Names, k[0], k[1])
			}
			seen[k]++
		}
		for k := range want {
			if seen[k] != 1 {
				return fmt.Errorf("%d containers of %s revision %s, want 1", seen[k], k[0], k[1])
			}
		}
		return nil
	}
}

// inspect returns the engine's view of a container, or nil if it is gone.
func inspectOrNil(t *testing.T, cli *client.Client, id string) *container.InspectResponse {
	t.Helper()
	res, err := cli.ContainerInspect(t.Context(), id, client.ContainerInspectOptions{})
	if cerrdefs.IsNotFound(err) {
		return nil
	}
	require.NoError(t, err)
	return &res.Container
}

// execIn runs cmd in a running container through the engine API and
// requires it to exit 0.
func execIn(t *testing.T, cli *client.Client, id string, cmd ...string) {
	t.Helper()
	ctx := t.Context()
	created, err := cli.ExecCreate(ctx, id, client.ExecCreateOptions{Cmd: cmd})
	require.NoError(t, err)
	_, err = cli.ExecStart(ctx, created.ID, client.ExecStartOptions{Detach: true})
	require.NoError(t, err)
	checkfor.Eventually(t, agentWait, agentPoll, func() error {
		res, err := cli.ExecInspect(ctx, created.ID, client.ExecInspectOptions{})
		switch {
		case err != nil:
			return err
		case res.Running:
			return errors.New("exec still running")
		case res.ExitCode != 0:
			t.Fatalf("exec %q in %s exited %d", cmd, id, res.ExitCode)
		}
		return nil
	})
}

// runForeign creates and starts a container edgeset does not own, with
// testimage.LabelTest so the node's cleanup removes it.
func runForeign(t *testing.T, e env, name string, labels map[string]string) string {
	t.Helper()
	all := map[string]string{testimage.LabelTest: e.node}
	for k, v := range labels {
		all[k] = v
	}
	res, err := e.cli.ContainerCreate(t.Context(), client.ContainerCreateOptions{
		Name:   name,
		Config: &container.Config{Image: e.image, Cmd: []string{"sleep"}, Labels: all},
	})
	require.NoError(t, err)
	_, err = e.cli.ContainerStart(t.Context(), res.ID, client.ContainerStartOptions{})
	require.NoError(t, err)
	return res.ID
}

// appTemplate is a one-container template running the test app with args,
// never pulled, stopped with a short grace.
func appTemplate(image string, args []string, mods ...func(*schema.PodSpec)) schema.PodTemplateSpec {
	grace := int64(3)
	t := schema.PodTemplateSpec{Spec: schema.PodSpec{
		TerminationGracePeriodSeconds: &grace,
		Containers: []schema.Container{{
			Name: "main", Image: image, ImagePullPolicy: schema.PullNever, Args: args,
		}},
	}}
	for _, m := range mods {
		m(&t.Spec)
	}
	return t
}

func revision(ds string, number int64, t schema.PodTemplateSpec) schema.Revision {
	return schema.Revision{SchemaVersion: schema.WireVersion, Hash: schema.TemplateHash(t), DaemonSet: ds, Number: number, Template: t}
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
