package mosquitto

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/edgeset/edgeset/internal/checkfor"
	"github.com/edgeset/edgeset/mqttclient"
	"github.com/edgeset/edgeset/schema"
)

var testUsers = map[string]string{
	"controller": "ctl-secret",
	"node-a":     "token-a",
	"node-b":     "token-b",
}

// inbox is a Handler recording the latest payload per topic.
type inbox struct {
	mu     sync.Mutex
	latest map[string]string // guarded by mu
}

func (in *inbox) handle(topic string, payload []byte) {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.latest[topic] = string(payload)
}

func (in *inbox) get(topic string) (string, bool) {
	in.mu.Lock()
	defer in.mu.Unlock()
	p, ok := in.latest[topic]
	return p, ok
}

func (in *inbox) expect(topic, want string) error {
	if got, ok := in.get(topic); !ok || got != want {
		return fmt.Errorf("%s = %q (received %v), want %q", topic, got, ok, want)
	}
	return nil
}

// connect starts an mqttclient for user with subs and waits for its
// connection; the inbox receives its messages.
func connect(t *testing.T, srv *Server, user, password string, subs ...string) (*mqttclient.Client, *inbox) {
	t.Helper()
	in := &inbox{latest: map[string]string{}}
	opts := mqttclient.Options{
		BrokerURL:          srv.URL(),
		ClientID:           user,
		Username:           user,
		Password:           password,
		Handler:            in.handle,
		FirstConnectJitter: -1,
		ConnectTimeout:     2 * time.Second,
		WriteTimeout:       5 * time.Second,
		Backoff:            mqttclient.Backoff{Initial: 20 * time.Millisecond, Max: 200 * time.Millisecond},
	}
	for _, s := range subs {
		opts.Subscriptions = append(opts.Subscriptions, mqttclient.Subscription{Filter: s, QoS: 1})
	}
	c, err := mqttclient.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	if password == testUsers[user] {
		checkfor.Eventually(t, 10*time.Second, 10*time.Millisecond, func() error {
			if !c.Connected() {
				return fmt.Errorf("%s not connected: %+v\n%s", user, c.Stats(), srv.Log())
			}
			return nil
		})
	}
	return c, in
}

func TestMosquittoACL(t *testing.T) {
	tests := []struct {
		name       string
		passwdTool func() string
	}{
		{"mosquitto_passwd", lookPasswdTool},
		{"HashPassword", func() string { return "" }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			saved := lookPasswdTool
			lookPasswdTool = tc.passwdTool
			srv := Start(t, Config{Users: testUsers})
			lookPasswdTool = saved
			checkACL(t, srv)
		})
	}
}

// checkACL exercises each ACL rule through real clients.
func checkACL(t *testing.T, srv *Server) {
	ctx := context.Background()
	ctl, ctlIn := connect(t, srv, "controller", testUsers["controller"], schema.TopicPrefix+"#")
	a, aIn := connect(t, srv, "node-a", testUsers["node-a"],
		schema.NodeTopic("node-a", schema.TopicDesired), schema.RevisionTopic("#"))

	// Writes: MQTT 3.1.1 acknowledges a denied publish and drops it, so
	// publish the forbidden message first and the allowed one after it on
	// the same connection: once the allowed one arrived, the other would have.
	mustPublish(t, a, schema.NodeTopic("node-b", schema.TopicStatus), "forged")
	mustPublish(t, a, schema.NodeTopic("node-a", schema.TopicStatus), "own")
	checkfor.Eventually(t, 5*time.Second, 10*time.Millisecond, func() error { return ctlIn.expect(schema.NodeTopic("node-a", schema.TopicStatus), "own") })
	if p, ok := ctlIn.get(schema.NodeTopic("node-b", schema.TopicStatus)); ok {
		t.Errorf("node-a wrote node-b's status: %q", p)
	}

	// Reads: node-a sees its own desired state and revisions.
	mustPublish(t, ctl, schema.NodeTopic("node-a", schema.TopicDesired), "desired-a")
	mustPublish(t, ctl, schema.RevisionTopic("r1"), "rev")
	checkfor.Eventually(t, 5*time.Second, 10*time.Millisecond, func() error { return aIn.expect(schema.NodeTopic("node-a", schema.TopicDesired), "desired-a") })
	checkfor.Eventually(t, 5*time.Second, 10*time.Millisecond, func() error { return aIn.expect(schema.RevisionTopic("r1"), "rev") })

	// node-a may not read node-b's desired state.
	err := a.Subscribe(ctx, mqttclient.Subscription{Filter: schema.NodeTopic("node-b", schema.TopicDesired), QoS: 1})
	// Mosquitto 2.0.11 grants a denied MQTT 3.1.1 subscription and then
	// filters delivery; newer brokers may answer 0x80 instead.
	if err != nil && !errors.Is(err, mqttclient.ErrSubscriptionRefused) {
		t.Fatalf("subscribe to node-b's desired: %v", err)
	}
	mustPublish(t, ctl, schema.NodeTopic("node-b", schema.TopicDesired), "desired-b")
	mustPublish(t, ctl, schema.NodeTopic("node-a", schema.TopicDesired), "desired-a2")
	checkfor.Eventually(t, 5*time.Second, 10*time.Millisecond, func() error { return aIn.expect(schema.NodeTopic("node-a", schema.TopicDesired), "desired-a2") })
	if p, ok := aIn.get(schema.NodeTopic("node-b", schema.TopicDesired)); ok {
		t.Errorf("node-a read node-b's desired state: %q", p)
	}

	// A wrong password never connects.
	bad, _ := connect(t, srv, "node-b", "wrong")
	checkfor.Eventually(t, 5*time.Second, 10*time.Millisecond, func() error {
		if st := bad.Stats(); st.ConnectFailures < 2 || st.Connects != 0 {
			return fmt.Errorf("wrong password: stats %+v, want failures and no connection", st)
		}
		return nil
	})
}

func mustPublish(t *testing.T, c *mqttclient.Client, topic, payload string) {
	t.Helper()
	if err := c.Publish(context.Background(), topic, []byte(payload), true); err != nil {
		t.Fatalf("publish %s: %v", topic, err)
	}
}

func TestMosquittoRestartKeepsPortAndRetained(t *testing.T) {
	srv := Start(t, Config{Users: testUsers})
	topic := schema.NodeTopic("node-a", schema.TopicDesired)
	ctl, _ := connect(t, srv, "controller", testUsers["controller"])
	mustPublish(t, ctl, topic, "kept")
	url := srv.URL()

	srv.Restart()

	if srv.URL() != url {
		t.Fatalf("URL changed from %s to %s", url, srv.URL())
	}
	_, in := connect(t, srv, "node-a", testUsers["node-a"], topic)
	checkfor.Eventually(t, 10*time.Second, 10*time.Millisecond, func() error { return in.expect(topic, "kept") })

	srv.Stop()
	srv.Stop() // idempotent
	checkfor.Eventually(t, 10*time.Second, 10*time.Millisecond, func() error {
		if ctl.Connected() {
			return errors.New("controller still connected to a stopped broker")
		}
		return nil
	})
	if err := ctl.Publish(context.Background(), topic, []byte("x"), true); !errors.Is(err, mqttclient.ErrNotConnected) {
		t.Errorf("Publish with the broker stopped = %v, want ErrNotConnected", err)
	}
}
