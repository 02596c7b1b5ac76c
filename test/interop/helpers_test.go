package interop

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/edgeset/edgeset/controller"
	"github.com/edgeset/edgeset/controller/api"
	"github.com/edgeset/edgeset/credential"
	"github.com/edgeset/edgeset/edgeagent"
	"github.com/edgeset/edgeset/edgeagent/fake"
	"github.com/edgeset/edgeset/internal/checkfor"
	"github.com/edgeset/edgeset/mqttclient"
	"github.com/edgeset/edgeset/schema"
	"github.com/edgeset/edgeset/test/mosquitto"
)

// wait bounds every convergence check of a small fleet.
const wait = 30 * time.Second

func testLogger(component string) *slog.Logger {
	if os.Getenv("EDGESET_TEST_LOG") == "" {
		return slog.New(slog.DiscardHandler)
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug})).With("component", component)
}

// fleet is a controller using a real Mosquitto as its external broker, with
// broker users for the controller and for each node named at start.
type fleet struct {
	t      testing.TB
	secret []byte
	broker *mosquitto.Server
	ctl    *controller.Controller
	api    *api.Client
}

// startFleet creates the fleet secret in a fresh controller data directory,
// starts Mosquitto with the controller's and the nodes' tokens as passwords
// and edgeset's pattern ACL, then runs the controller against it. mcfg sets
// the broker's queue sizes; Users and ControllerUser are filled here.
func startFleet(t testing.TB, nodes []string, mcfg mosquitto.Config) *fleet {
	t.Helper()
	dir := t.TempDir()
	secret, err := credential.LoadOrCreateFleetSecret(dir)
	if err != nil {
		t.Fatal(err)
	}
	mcfg.Users = map[string]string{credential.ControllerUsername: credential.ControllerToken(secret)}
	for _, n := range nodes {
		mcfg.Users[n] = credential.NodeToken(secret, n)
	}
	// controller.Config's default BrokerUsername is credential.ControllerUsername.
	mcfg.ControllerUser = credential.ControllerUsername
	srv := mosquitto.Start(t, mcfg)

	pwFile := filepath.Join(t.TempDir(), "controller.password")
	if err := os.WriteFile(pwFile, []byte(credential.ControllerToken(secret)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ctl, err := controller.New(controller.Config{
		DataDir:            dir,
		BrokerURL:          srv.URL(),
		BrokerPasswordFile: pwFile,
		APIAddr:            "127.0.0.1:0",
	}, testLogger("controller"))
	if err != nil {
		t.Fatal(err)
	}
	runUntilCleanup(t, "controller", ctl.Run)
	select {
	case <-ctl.Synced():
	case <-time.After(wait):
		t.Fatal("controller made no reconcile pass")
	}
	return &fleet{
		t: t, secret: secret, broker: srv, ctl: ctl,
		api: api.NewClient("http://"+ctl.APIAddr().String(), ctl.Token(), nil),
	}
}

// runUntilCleanup runs run on its own goroutine until the test ends, then
// cancels it and waits for it to return.
func runUntilCleanup(t testing.TB, what string, run func(context.Context) error) {
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

// apply applies a manifest through the controller's API.
func (f *fleet) apply(manifest string) {
	f.t.Helper()
	if _, err := f.api.Apply(context.Background(), "interop.yaml", []byte(manifest), false); err != nil {
		f.t.Fatalf("apply: %v", err)
	}
}

// agent is a real edgeset agent (edgeagent.Node) over the fake runtime.
type agent struct {
	name string
	node *edgeagent.Node
	rt   *fake.Runtime
}

// startAgent runs node's agent against the fleet's broker with its node
// token, announcing labels and Ready=True.
func (f *fleet) startAgent(name string, labels map[string]string) *agent {
	f.t.Helper()
	a := &agent{name: name, rt: fake.New()}
	st := schema.NodeStatus{
		Labels:     map[string]string{schema.LabelHostname: name},
		Conditions: []schema.NodeCondition{{Type: schema.NodeReady, Status: schema.ConditionTrue}},
	}
	for k, v := range labels {
		st.Labels[k] = v
	}
	node, err := edgeagent.NewNode(edgeagent.NodeOptions{
		Agent: edgeagent.Config{NodeName: name, DataDir: f.t.TempDir(), Logger: testLogger("agent " + name)},
		MQTT: mqttclient.Options{
			BrokerURL:          f.broker.URL(),
			Password:           credential.NodeToken(f.secret, name),
			FirstConnectJitter: -1,
			Backoff:            mqttclient.Backoff{Initial: 50 * time.Millisecond, Max: 500 * time.Millisecond},
		},
		Status: func(context.Context) schema.NodeStatus { return st },
	}, a.rt)
	if err != nil {
		f.t.Fatal(err)
	}
	a.node = node
	runUntilCleanup(f.t, "agent "+name, node.Run)
	return a
}

// running returns the images of the agent's running containers.
func (a *agent) running() []string {
	var images []string
	for _, c := range a.rt.Containers() {
		if c.Running {
			images = append(images, c.Image)
		}
	}
	return images
}

// expectRunning checks that the agent runs exactly one container, of image.
func (a *agent) expectRunning(image string) error {
	if got := a.running(); len(got) != 1 || got[0] != image {
		return fmt.Errorf("node %s runs %v, want exactly [%s]", a.name, got, image)
	}
	return nil
}

// spy is a bare MQTT client authenticated as a node, recording every message
// it receives by topic.
type spy struct {
	client *mqttclient.Client
	mu     sync.Mutex
	got    map[string][]string // guarded by mu; payloads by topic, in order
}

// startSpy connects as user (a node) with a client ID of its own, so it
// does not take over the real agent's session, and waits for the connection.
func (f *fleet) startSpy(user string) *spy {
	f.t.Helper()
	s := &spy{got: map[string][]string{}}
	var err error
	s.client, err = mqttclient.New(mqttclient.Options{
		BrokerURL:          f.broker.URL(),
		ClientID:           user + "-spy",
		Username:           user,
		Password:           credential.NodeToken(f.secret, user),
		Handler:            s.handle,
		FirstConnectJitter: -1,
		Backoff:            mqttclient.Backoff{Initial: 50 * time.Millisecond, Max: 500 * time.Millisecond},
	})
	if err != nil {
		f.t.Fatal(err)
	}
	runUntilCleanup(f.t, "spy "+user, s.client.Run)
	checkfor.Eventually(f.t, wait, 20*time.Millisecond, func() error {
		if !s.client.Connected() {
			return fmt.Errorf("spy %s not connected: %+v\nmosquitto log:\n%s", user, s.client.Stats(), lastLines(f.broker.Log(), 20))
		}
		return nil
	})
	return s
}

func (s *spy) handle(topic string, payload []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.got[topic] = append(s.got[topic], string(payload))
}

// received returns the payloads received on topic, oldest first.
func (s *spy) received(topic string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.got[topic]...)
}

// lastLines returns the last n lines of a log, for failure messages.
func lastLines(log string, n int) string {
	lines := strings.Split(strings.TrimRight(log, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
