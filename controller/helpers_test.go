package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"

	"github.com/edgeset/edgeset/broker"
	"github.com/edgeset/edgeset/controller/api"
	"github.com/edgeset/edgeset/credential"
	"github.com/edgeset/edgeset/internal/checkfor"
	"github.com/edgeset/edgeset/mqttclient"
	"github.com/edgeset/edgeset/schema"
	"github.com/edgeset/edgeset/signing"
)

const wait = 15 * time.Second

// testController is a controller running on loopback for one test.
type testController struct {
	*Controller
	cfg    Config
	api    *api.Client
	secret []byte
	cancel context.CancelFunc
	done   chan error
	once   sync.Once
}

func testLogger(t testing.TB) *slog.Logger {
	if os.Getenv("EDGESET_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.DiscardHandler)
}

// startController runs a controller with cfg (data dir, listeners on
// 127.0.0.1:0 unless set) until stop or the end of the test.
func startController(t testing.TB, cfg Config) *testController {
	t.Helper()
	return startControllerLogging(t, cfg, testLogger(t))
}

// startControllerLogging is startController logging to log.
func startControllerLogging(t testing.TB, cfg Config, log *slog.Logger) *testController {
	t.Helper()
	if cfg.DataDir == "" {
		cfg.DataDir = t.TempDir()
	}
	if cfg.MQTTAddr == "" {
		cfg.MQTTAddr = "127.0.0.1:0"
	}
	if cfg.APIAddr == "" {
		cfg.APIAddr = "127.0.0.1:0"
	}
	c, err := New(cfg, log)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	tc := &testController{Controller: c, cfg: cfg, cancel: cancel, done: make(chan error, 1)}
	go func() { tc.done <- c.Run(ctx) }()
	t.Cleanup(tc.stop)
	select {
	case <-c.Synced():
	case err := <-tc.done:
		t.Fatalf("controller stopped before its first pass: %v", err)
	case <-time.After(wait):
		t.Fatal("controller did not make its first pass")
	}
	tc.api = api.NewClient("http://"+c.APIAddr().String(), c.Token(), nil)
	tc.secret, err = credential.LoadOrCreateFleetSecret(cfg.DataDir)
	require.NoError(t, err)
	return tc
}

// stop ends Run and waits for it; safe to call twice.
func (tc *testController) stop() {
	tc.once.Do(func() {
		tc.cancel()
		select {
		case err := <-tc.done:
			if err != nil {
				panic(fmt.Sprintf("controller Run: %v", err))
			}
		case <-time.After(wait):
			panic("controller did not stop")
		}
	})
}

func (tc *testController) brokerURL() string { return "tcp://" + tc.MQTTAddr().String() }

// embeddedBroker is the controller's embedded broker; the test fails if
// the controller uses an external one.
func (tc *testController) embeddedBroker(t testing.TB) *broker.Broker {
	t.Helper()
	e, ok := innermost(tc.transport).(*embeddedTransport)
	if !ok {
		t.Fatalf("the controller's transport is %s, not the embedded broker", tc.transport.Describe())
	}
	return e.broker
}

// applyYAML applies a manifest through the API.
func (tc *testController) applyYAML(t testing.TB, manifest string) []api.ApplyResult {
	t.Helper()
	res, err := tc.api.Apply(context.Background(), "test.yaml", []byte(manifest), false)
	require.NoError(t, err)
	return res
}

// fakeNode is a scripted device: it announces itself, records the desired
// states it receives and reports whatever observed state the test says.
type fakeNode struct {
	t      testing.TB
	name   string
	client *mqttclient.Client
	cancel context.CancelFunc
	done   chan error

	mu       sync.Mutex
	status   schema.NodeStatus     // the last announced, announced again on every connection
	desired  []schema.DesiredState // every desired state received, in order
	session  int64
	stopOnce sync.Once
	// behave, when set, turns each desired state received into the observed
	// state the node reports, as a running agent would.
	behave func(schema.DesiredState) schema.ObservedState
}

// startNode connects a fake node with status st (its name is st.Node).
func startNode(t testing.TB, url string, secret []byte, st schema.NodeStatus) *fakeNode {
	t.Helper()
	st.SchemaVersion = schema.WireVersion
	n := &fakeNode{t: t, name: st.Node, done: make(chan error, 1), session: time.Now().UnixNano(), status: st}
	var err error
	n.client, err = mqttclient.New(mqttclient.Options{
		BrokerURL: url, ClientID: st.Node, Username: st.Node, Password: credential.NodeToken(secret, st.Node),
		Will:          func() *mqttclient.Message { return n.presence(false) },
		Subscriptions: []mqttclient.Subscription{{Filter: schema.NodeTopic(st.Node, schema.TopicDesired), QoS: 1}},
		Handler:       n.handle,
		OnConnect: func(ctx context.Context) {
			p := n.presence(true)
			_ = n.client.Publish(ctx, p.Topic, p.Payload, true)
			n.mu.Lock()
			st := n.status
			n.mu.Unlock()
			n.announce(ctx, st)
		},
		FirstConnectJitter: time.Millisecond,
		Backoff:            mqttclient.Backoff{Initial: 50 * time.Millisecond, Max: 200 * time.Millisecond},
	})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	n.cancel = cancel
	go func() { n.done <- n.client.Run(ctx) }()
	t.Cleanup(n.stop)
	return n
}

func (n *fakeNode) presence(online bool) *mqttclient.Message {
	payload, _ := schema.Encode(schema.Presence{SchemaVersion: schema.WireVersion, Node: n.name, Online: online, Session: n.session})
	return &mqttclient.Message{Topic: schema.NodeTopic(n.name, schema.TopicOnline), Payload: payload, Retained: true}
}

func (n *fakeNode) announce(ctx context.Context, st schema.NodeStatus) {
	st.SchemaVersion, st.Node = schema.WireVersion, n.name
	payload, err := schema.Encode(st)
	require.NoError(n.t, err)
	_ = n.client.Publish(ctx, schema.NodeTopic(n.name, schema.TopicStatus), payload, true)
}

// reannounce publishes a new status, as an agent does on change, and
// announces it on every connection after, as an agent does (not the
// status it started with, which would undo the change after a reconnect).
func (n *fakeNode) reannounce(st schema.NodeStatus) {
	n.mu.Lock()
	n.status = st
	n.mu.Unlock()
	checkfor.Eventually(n.t, wait, 20*time.Millisecond, func() error {
		st.SchemaVersion, st.Node = schema.WireVersion, n.name
		payload, _ := schema.Encode(st)
		return n.client.Publish(context.Background(), schema.NodeTopic(n.name, schema.TopicStatus), payload, true)
	})
}

// report publishes an observed state.
func (n *fakeNode) report(obs schema.ObservedState) {
	obs.SchemaVersion, obs.Node = schema.WireVersion, n.name
	payload, err := schema.Encode(obs)
	require.NoError(n.t, err)
	checkfor.Eventually(n.t, wait, 20*time.Millisecond, func() error {
		return n.client.Publish(context.Background(), schema.NodeTopic(n.name, schema.TopicObserved), payload, true)
	})
}

func (n *fakeNode) handle(topic string, payload []byte) {
	if signing.IsEnvelope(payload) { // a signing controller's: the node trusts it unverified
		env, err := signing.DecodeEnvelope(payload)
		var st signing.Statement
		if err == nil {
			err = json.Unmarshal(env.Payload, &st)
		}
		if err != nil {
			n.t.Errorf("node %s: bad envelope on %s: %v", n.name, topic, err)
			return
		}
		payload = st.Body
	}
	d, err := schema.DecodeDesiredState(payload)
	if err != nil {
		n.t.Errorf("node %s: bad desired state on %s: %v", n.name, topic, err)
		return
	}
	n.mu.Lock()
	n.desired = append(n.desired, d)
	behave := n.behave
	n.mu.Unlock()
	if behave != nil {
		go n.report(behave(d))
	}
}

// healthy runs every desired instance, ready; bad revisions crash-loop.
func healthy(bad ...string) func(schema.DesiredState) schema.ObservedState {
	return func(d schema.DesiredState) schema.ObservedState {
		since := time.Now().Add(-time.Hour)
		obs := schema.ObservedState{ObservedGeneration: d.Generation}
		for _, in := range d.Instances {
			st := schema.InstanceStatus{DaemonSet: in.DaemonSet, Revision: in.Revision, Phase: schema.PhaseRunning, Ready: true, ReadySince: &since}
			if slices.Contains(bad, in.Revision) {
				st = schema.InstanceStatus{DaemonSet: in.DaemonSet, Revision: in.Revision, Phase: schema.PhaseCrashLoopBackOff, Restarts: 3, Message: "exit code 1"}
			}
			obs.Instances = append(obs.Instances, st)
		}
		return obs
	}
}

func (n *fakeNode) lastDesired() (schema.DesiredState, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if len(n.desired) == 0 {
		return schema.DesiredState{}, false
	}
	return n.desired[len(n.desired)-1], true
}

// daemonSets lists the daemonsets of the last desired state.
func (n *fakeNode) daemonSets() []string {
	d, _ := n.lastDesired()
	var out []string
	for _, in := range d.Instances {
		out = append(out, in.DaemonSet)
	}
	return out
}

// expectDaemonSets waits until the node has a desired state and it runs
// exactly want. A node that has none yet does not count as running
// nothing: its first status may not even be out yet, and a status the
// test publishes next could then be overtaken by it.
func (n *fakeNode) expectDaemonSets(want ...string) {
	n.t.Helper()
	checkfor.Eventually(n.t, wait, 20*time.Millisecond, func() error {
		if _, ok := n.lastDesired(); !ok {
			return fmt.Errorf("node %s has no desired state yet", n.name)
		}
		got := n.daemonSets()
		if fmt.Sprint(got) != fmt.Sprint(nilIfEmpty(want)) {
			return fmt.Errorf("node %s desired daemonsets %v, want %v", n.name, got, want)
		}
		return nil
	})
}

func nilIfEmpty(s []string) []string {
	if len(s) == 0 {
		return nil
	}
	return s
}

// stop disconnects cleanly (no will); safe to call twice.
func (n *fakeNode) stop() {
	n.stopOnce.Do(func() {
		n.cancel()
		<-n.done
	})
}

const exporterYAML = `apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: exporter
  namespace: monitoring
spec:
  selector:
    matchLabels: {app: exporter}
  template:
    metadata:
      labels: {app: exporter}
    spec:
      nodeSelector:
        role: gateway
      containers:
      - name: exporter
        image: registry.local/exporter:1.0
`

func gateway(name string, labels map[string]string) schema.NodeStatus {
	l := map[string]string{"role": "gateway", schema.LabelHostname: name}
	for k, v := range labels {
		l[k] = v
	}
	return schema.NodeStatus{Node: name, Labels: l, Conditions: []schema.NodeCondition{{Type: schema.NodeReady, Status: schema.ConditionTrue}}}
}

// removeBrokerState deletes the embedded broker's retained messages.
func removeBrokerState(dataDir string) error {
	return os.Remove(dataDir + "/" + broker.StoreFile)
}

func histogramCount(h interface{ Write(*dto.Metric) error }) float64 {
	var m dto.Metric
	if err := h.Write(&m); err != nil {
		return -1
	}
	return float64(m.GetHistogram().GetSampleCount())
}

func counterValue(c interface{ Write(*dto.Metric) error }) float64 {
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		return -1
	}
	return m.GetCounter().GetValue()
}
