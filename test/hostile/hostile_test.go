package hostile

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/edgeset/edgeset/controller"
	"github.com/edgeset/edgeset/controller/api"
	"github.com/edgeset/edgeset/credential"
	"github.com/edgeset/edgeset/edgeagent"
	"github.com/edgeset/edgeset/edgeagent/fake"
	"github.com/edgeset/edgeset/internal/checkfor"
	"github.com/edgeset/edgeset/mqttclient"
	"github.com/edgeset/edgeset/schema"
	"github.com/edgeset/edgeset/signing"
	"github.com/edgeset/edgeset/test/mosquitto"
)

// wait bounds every convergence check.
const wait = 30 * time.Second

var nodes = []string{"gw-1", "gw-2", "gw-3"}

func testLogger(component string) *slog.Logger {
	if os.Getenv("EDGESET_TEST_LOG") == "" {
		return slog.New(slog.DiscardHandler)
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug})).With("component", component)
}

// fleet is a signing controller, its broker, and the fleet's root key.
type fleet struct {
	t         *testing.T
	dir       string
	secret    []byte
	brokerURL string
	ctl       *controller.Controller
	api       *api.Client
	root      ed25519.PrivateKey
}

// startFleet runs a controller with signing on, over the embedded broker
// or, with mosquittoBroker, a real Mosquitto with edgeset's ACL.
func startFleet(t *testing.T, mosquittoBroker bool) *fleet {
	t.Helper()
	f := &fleet{t: t, dir: t.TempDir()}
	var err error
	f.secret, err = credential.LoadOrCreateFleetSecret(f.dir)
	require.NoError(t, err)
	cfg := controller.Config{DataDir: f.dir, APIAddr: "127.0.0.1:0", MQTTAddr: "127.0.0.1:0", Signing: true}
	if mosquittoBroker {
		mcfg := mosquitto.Config{Users: map[string]string{credential.ControllerUsername: credential.ControllerToken(f.secret)},
			ControllerUser: credential.ControllerUsername}
		for _, n := range nodes {
			mcfg.Users[n] = credential.NodeToken(f.secret, n)
		}
		srv := mosquitto.Start(t, mcfg)
		pw := filepath.Join(t.TempDir(), "controller.password")
		require.NoError(t, os.WriteFile(pw, []byte(credential.ControllerToken(f.secret)+"\n"), 0o600))
		cfg.BrokerURL, cfg.BrokerPasswordFile = srv.URL(), pw
		f.brokerURL = srv.URL()
	}
	f.ctl, err = controller.New(cfg, testLogger("controller"))
	require.NoError(t, err)
	runUntilCleanup(t, "controller", f.ctl.Run)
	select {
	case <-f.ctl.Synced():
	case <-time.After(wait):
		t.Fatal("controller made no reconcile pass")
	}
	if !mosquittoBroker {
		f.brokerURL = "tcp://" + f.ctl.MQTTAddr().String()
	}
	f.api = api.NewClient("http://"+f.ctl.APIAddr().String(), f.ctl.Token(), nil)
	f.root = mustKey(t)
	return f
}

func mustKey(t *testing.T) ed25519.PrivateKey {
	t.Helper()
	k, err := signing.GenerateKey()
	require.NoError(t, err)
	return k
}

func pubOf(k ed25519.PrivateKey) ed25519.PublicKey { return k.Public().(ed25519.PublicKey) }

// delegate signs key set version v for the controller's key with the
// root and uploads it, as edgesetctl keys delegate does.
func (f *fleet) delegate(v uint64) []byte {
	f.t.Helper()
	ctx := context.Background()
	st, err := f.api.Signing(ctx)
	require.NoError(f.t, err)
	require.True(f.t, st.Enabled)
	pub, err := signing.ParsePublicKey(st.PublicKey)
	require.NoError(f.t, err)
	env, err := signing.SignKeySet(f.root, signing.KeySet{Version: v, IssuedAt: time.Now().UTC(),
		Keys: []signing.OnlineKey{{ID: st.KeyID, PublicKey: pub, Expires: time.Now().Add(24 * time.Hour)}}})
	require.NoError(f.t, err)
	_, err = f.api.PutKeySet(ctx, env)
	require.NoError(f.t, err)
	return env
}

// agent is a real edgeset agent pinning the fleet root, over the fake
// runtime.
type agent struct {
	name string
	node *edgeagent.Node
	rt   *fake.Runtime
}

// startAgent runs agent name; each edit may change its options and its
// runtime's knobs before it starts.
func (f *fleet) startAgent(name string, edits ...func(*edgeagent.NodeOptions, *fake.Runtime)) *agent {
	f.t.Helper()
	a := &agent{name: name, rt: fake.New()}
	st := schema.NodeStatus{
		Labels:     map[string]string{schema.LabelHostname: name, "role": "gateway"},
		Conditions: []schema.NodeCondition{{Type: schema.NodeReady, Status: schema.ConditionTrue}},
	}
	opts := edgeagent.NodeOptions{
		Agent: edgeagent.Config{NodeName: name, DataDir: f.t.TempDir(), Logger: testLogger("agent " + name),
			TrustRoot: pubOf(f.root), ResyncInterval: 100 * time.Millisecond},
		MQTT: mqttclient.Options{
			BrokerURL: f.brokerURL, Password: credential.NodeToken(f.secret, name), FirstConnectJitter: -1,
			Backoff: mqttclient.Backoff{Initial: 50 * time.Millisecond, Max: 500 * time.Millisecond},
		},
		Status: func(context.Context) schema.NodeStatus { return st },
	}
	for _, edit := range edits {
		edit(&opts, a.rt)
	}
	node, err := edgeagent.NewNode(opts, a.rt)
	require.NoError(f.t, err)
	a.node = node
	runUntilCleanup(f.t, "agent "+name, node.Run)
	return a
}

// images returns the images of the agent's running containers.
func (a *agent) images() []string {
	var out []string
	for _, c := range a.rt.Containers() {
		if c.Running {
			out = append(out, c.Image)
		}
	}
	return out
}

func (a *agent) expectRunning(images ...string) error {
	if got := a.images(); !slices.Equal(got, images) {
		return fmt.Errorf("node %s runs %v, want %v", a.name, got, images)
	}
	return nil
}

// attacker is an MQTT client holding the controller's credential (its own
// client ID), recording every message under edgeset/.
type attacker struct {
	client *mqttclient.Client
	mu     sync.Mutex
	got    map[string][][]byte // guarded by mu
}

func (f *fleet) startAttacker() *attacker {
	f.t.Helper()
	a := &attacker{got: map[string][][]byte{}}
	var err error
	a.client, err = mqttclient.New(mqttclient.Options{
		BrokerURL: f.brokerURL, ClientID: "attacker", Username: credential.ControllerUsername,
		Password: credential.ControllerToken(f.secret), FirstConnectJitter: -1,
		Subscriptions: []mqttclient.Subscription{{Filter: "edgeset/#", QoS: 1}},
		Handler: func(topic string, payload []byte) {
			a.mu.Lock()
			defer a.mu.Unlock()
			a.got[topic] = append(a.got[topic], append([]byte(nil), payload...))
		},
		Backoff: mqttclient.Backoff{Initial: 50 * time.Millisecond, Max: 500 * time.Millisecond},
	})
	require.NoError(f.t, err)
	runUntilCleanup(f.t, "attacker", a.client.Run)
	checkfor.Eventually(f.t, wait, 20*time.Millisecond, func() error {
		if !a.client.Connected() {
			return fmt.Errorf("attacker not connected")
		}
		return nil
	})
	return a
}

// captured returns what the attacker saw on topic, oldest first.
func (a *attacker) captured(topic string) [][]byte {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.got[topic])
}

// capturedDesired returns the captured envelope of node's desired state of
// generation gen.
func (a *attacker) capturedDesired(t *testing.T, node string, gen uint64) []byte {
	t.Helper()
	topic := schema.NodeTopic(node, schema.TopicDesired)
	for _, env := range a.captured(topic) {
		var e signing.Envelope
		var st signing.Statement
		if json.Unmarshal(env, &e) == nil && json.Unmarshal(e.Payload, &st) == nil && st.Generation == gen {
			return env
		}
	}
	t.Fatalf("no desired state of generation %d captured on %s", gen, topic)
	return nil
}

func (a *attacker) publish(t *testing.T, topic string, payload []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	require.NoError(t, a.client.Publish(ctx, topic, payload, true))
}

func runUntilCleanup(t *testing.T, what string, run func(context.Context) error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("%s Run: %v", what, err)
			}
		case <-time.After(wait):
			t.Errorf("%s did not stop within %s", what, wait)
		}
	})
}

func manifest(image string) string {
	return fmt.Sprintf(`apiVersion: apps/v1
kind: DaemonSet
metadata: {name: exporter, namespace: monitoring}
spec:
  selector: {matchLabels: {app: exporter}}
  template:
    metadata: {labels: {app: exporter}}
    spec:
      nodeSelector: {role: gateway}
      containers:
      - {name: exporter, image: %s}
`, image)
}

func (f *fleet) apply(image string) {
	f.t.Helper()
	_, err := f.api.Apply(context.Background(), "hostile.yaml", []byte(manifest(image)), false)
	require.NoError(f.t, err)
}

// refusals returns node's refusal counts by reason as the controller's
// API shows them.
func (f *fleet) refusals(node string) map[string]int64 {
	f.t.Helper()
	st, err := f.api.Signing(context.Background())
	require.NoError(f.t, err)
	for _, r := range st.Refusals {
		if r.Node == node {
			return r.ByReason
		}
	}
	return nil
}

// expectRefused waits until the controller shows node refusing reason
// more than before times.
func (f *fleet) expectRefused(node, reason string, before int64) {
	f.t.Helper()
	checkfor.Eventually(f.t, wait, 20*time.Millisecond, func() error {
		if got := f.refusals(node)[reason]; got <= before {
			return fmt.Errorf("node %s: %s refused %d times, want more than %d (all: %v)", node, reason, got, before, f.refusals(node))
		}
		return nil
	})
}

// forgedRevision is a revision of image, content-addressed correctly but
// signed by key, for topic.
func forgedRevision(t *testing.T, key ed25519.PrivateKey, image string, gen uint64) (hash string, env []byte) {
	t.Helper()
	tmpl := schema.PodTemplateSpec{Spec: schema.PodSpec{Containers: []schema.Container{{Name: "exporter", Image: image}}}}
	rev := schema.Revision{SchemaVersion: schema.WireVersion, Hash: schema.TemplateHash(tmpl), DaemonSet: "monitoring/exporter", Number: 9, Template: tmpl}
	return rev.Hash, signDoc(t, key, schema.RevisionTopic(rev.Hash), signing.AnyNode, gen, time.Now(), rev)
}

func signDoc(t *testing.T, key ed25519.PrivateKey, topic, node string, gen uint64, issued time.Time, v any) []byte {
	t.Helper()
	body, err := json.Marshal(v)
	require.NoError(t, err)
	env, err := signing.NewSigner(key).Sign(signing.Statement{Topic: topic, Node: node, Generation: gen,
		IssuedAt: issued, ExpiresAt: issued.Add(time.Hour), Body: body})
	require.NoError(t, err)
	return env
}

func TestHostileEmbeddedBroker(t *testing.T) { testHostileBroker(t, false) }

func TestHostileMosquitto(t *testing.T) { testHostileBroker(t, true) }

// testHostileBroker: every forged, replayed, downgraded, cross-node and
// expired document an attacker with the controller's MQTT credential
// publishes is refused by the agents, nothing of it runs, and the
// controller's API shows the refusals.
func testHostileBroker(t *testing.T, mosquittoBroker bool) {
	f := startFleet(t, mosquittoBroker)
	keySet1 := f.delegate(1)
	evil := f.startAttacker()
	gw1, gw2 := f.startAgent("gw-1"), f.startAgent("gw-2")

	f.apply("registry.local/exporter:1.0")
	checkfor.Eventually(t, wait, 50*time.Millisecond, func() error {
		return errorsJoin(gw1.expectRunning("registry.local/exporter:1.0"), gw2.expectRunning("registry.local/exporter:1.0"))
	})
	gen1 := latestGeneration(t, evil, "gw-1")
	f.apply("registry.local/exporter:2.0")
	f.delegate(2)
	checkfor.Eventually(t, wait, 50*time.Millisecond, func() error {
		return errorsJoin(gw1.expectRunning("registry.local/exporter:2.0"), gw2.expectRunning("registry.local/exporter:2.0"))
	})
	gen2 := latestGeneration(t, evil, "gw-1")
	require.Greater(t, gen2, gen1)

	desired1 := schema.NodeTopic("gw-1", schema.TopicDesired)
	attackerKey := mustKey(t)
	evilHash, _ := forgedRevision(t, attackerKey, "evil/miner:6.6.6", 0)
	evilState := schema.DesiredState{SchemaVersion: schema.WireVersion, Node: "gw-1", Generation: gen2 + 100,
		Instances: []schema.DesiredInstance{{DaemonSet: "monitoring/exporter", Revision: evilHash}}}
	onlineKey, err := signing.ReadPrivateKeyFile(filepath.Join(f.dir, "signing.key"))
	require.NoError(t, err)

	attacks := []struct {
		name, topic, reason string
		payload             []byte
	}{
		{"forged desired state", desired1, "SigningKeyUnknown", signDoc(t, attackerKey, desired1, "gw-1", gen2+100, time.Now(), evilState)},
		{"unsigned desired state", desired1, "SignedDocumentMissing", mustJSON(t, evilState)},
		{"replayed older generation", desired1, "SignedDocumentRollback", evil.capturedDesired(t, "gw-1", gen1)},
		{"cross-node: gw-2's desired state on gw-1's topic", desired1, "SignedDocumentWrongTopic",
			evil.capturedDesired(t, "gw-2", latestGeneration(t, evil, "gw-2"))},
		// An old document the controller did sign, long expired (the test
		// reads the online key to make one; the attacker would have
		// recorded it when it was current).
		{"expired desired state", desired1, "SignedDocumentExpired",
			signDoc(t, onlineKey, desired1, "gw-1", gen2+100, time.Now().Add(-48*time.Hour), evilState)},
		{"downgraded key set", schema.KeySetTopic, "KeySetDowngrade", keySet1},
		{"key set of another root", schema.KeySetTopic, "KeySetNotSignedByRoot", attackerKeySet(t, attackerKey)},
	}
	for _, a := range attacks {
		before := f.refusals("gw-1")[a.reason]
		evil.publish(t, a.topic, a.payload)
		f.expectRefused("gw-1", a.reason, before)
	}
	// The forged revision, on the topic of the revision a new node is
	// about to need: the new node refuses it and runs nothing. (The key
	// set is delegated anew first: the attacker's retained key set would
	// otherwise leave the new node holding every document unverified.)
	current := currentRevision(t, evil, "gw-2")
	_, forgedCurrent := forgedRevisionOn(t, attackerKey, current)
	evil.publish(t, schema.RevisionTopic(current), forgedCurrent)
	f.delegate(3)
	gw3 := f.startAgent("gw-3")
	f.expectRefused("gw-3", "SigningKeyUnknown", 0)

	require.NoError(t, gw1.expectRunning("registry.local/exporter:2.0"), "gw-1 keeps its last verified state")
	require.NoError(t, gw2.expectRunning("registry.local/exporter:2.0"))
	require.NoError(t, gw3.expectRunning(), "gw-3 runs nothing it could not verify")

	// The refusals are node events too.
	evs, err := f.api.Events(context.Background(), api.EventFilter{Object: "node/gw-1"})
	require.NoError(t, err)
	var reasons []string
	for _, e := range evs {
		reasons = append(reasons, e.Reason)
	}
	for _, a := range attacks {
		require.Contains(t, reasons, a.reason)
	}
}

// currentRevision is the revision hash in the last desired state of node
// the attacker captured.
func currentRevision(t *testing.T, a *attacker, node string) string {
	t.Helper()
	st := lastStatement(t, a, node)
	var ds schema.DesiredState
	require.NoError(t, json.Unmarshal(st.Body, &ds))
	require.NotEmpty(t, ds.Instances)
	return ds.Instances[0].Revision
}

// forgedRevisionOn forges the revision of hash: the attacker cannot find
// another template of that hash, so it publishes the genuine template
// (copied from the retained message it read) under its own signature.
func forgedRevisionOn(t *testing.T, key ed25519.PrivateKey, hash string) (string, []byte) {
	t.Helper()
	tmpl := schema.PodTemplateSpec{Spec: schema.PodSpec{Containers: []schema.Container{{Name: "exporter", Image: "registry.local/exporter:2.0"}}}}
	rev := schema.Revision{SchemaVersion: schema.WireVersion, Hash: hash, DaemonSet: "monitoring/exporter", Number: 2, Template: tmpl}
	return hash, signDoc(t, key, schema.RevisionTopic(hash), signing.AnyNode, 0, time.Now(), rev)
}

func attackerKeySet(t *testing.T, key ed25519.PrivateKey) []byte {
	t.Helper()
	env, err := signing.SignKeySet(key, signing.KeySet{Version: 1000, IssuedAt: time.Now().UTC(),
		Keys: []signing.OnlineKey{{ID: signing.KeyID(pubOf(key)), PublicKey: pubOf(key), Expires: time.Now().Add(time.Hour)}}})
	require.NoError(t, err)
	return env
}

// lastStatement is the statement of the last desired state of node the
// attacker captured.
func lastStatement(t *testing.T, a *attacker, node string) signing.Statement {
	t.Helper()
	got := a.captured(schema.NodeTopic(node, schema.TopicDesired))
	require.NotEmpty(t, got, "no desired state of %s captured", node)
	var e signing.Envelope
	require.NoError(t, json.Unmarshal(got[len(got)-1], &e), "desired states are envelopes")
	var st signing.Statement
	require.NoError(t, json.Unmarshal(e.Payload, &st))
	return st
}

func latestGeneration(t *testing.T, a *attacker, node string) uint64 {
	t.Helper()
	var gen uint64
	checkfor.Eventually(t, wait, 20*time.Millisecond, func() error {
		got := a.captured(schema.NodeTopic(node, schema.TopicDesired))
		if len(got) == 0 {
			return fmt.Errorf("no desired state of %s captured", node)
		}
		gen = lastStatement(t, a, node).Generation
		return nil
	})
	return gen
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return b
}

func errorsJoin(errs ...error) error {
	var msgs []string
	for _, err := range errs {
		if err != nil {
			msgs = append(msgs, err.Error())
		}
	}
	if len(msgs) == 0 {
		return nil
	}
	return fmt.Errorf("%s", strings.Join(msgs, "; "))
}
