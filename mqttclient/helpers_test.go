package mqttclient

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	mochi "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/hooks/auth"
	"github.com/mochi-mqtt/server/v2/listeners"

	"github.com/edgeset/edgeset/internal/checkfor"
	"github.com/edgeset/edgeset/internal/mochistop"
)

// startMochi starts an in-process broker that allows everyone, on a free
// loopback port, closed on cleanup.
func startMochi(t testing.TB) (*mochi.Server, string) {
	t.Helper()
	srv, url, _ := startStoppableMochi(t)
	return srv, url
}

// startStoppableMochi is startMochi that also returns stop, which closes
// the broker (once; cleanup then does nothing): a broker node dying.
func startStoppableMochi(t testing.TB) (*mochi.Server, string, func()) {
	t.Helper()
	srv := mochi.New(&mochi.Options{InlineClient: true, Logger: slog.New(slog.DiscardHandler)})
	if err := srv.AddHook(new(auth.AllowHook), nil); err != nil {
		t.Fatalf("add hook: %v", err)
	}
	ln := listeners.NewTCP(listeners.Config{ID: "test", Address: "127.0.0.1:0"})
	if err := srv.AddListener(ln); err != nil {
		t.Fatalf("add listener: %v", err)
	}
	if err := srv.Serve(); err != nil {
		t.Fatalf("serve: %v", err)
	}
	var once sync.Once
	stop := func() { once.Do(func() { _ = mochistop.Close(srv, "test") }) }
	t.Cleanup(stop)
	return srv, "tcp://" + ln.Address(), stop
}

// testOptions returns options with fast timings for tests.
func testOptions(url, clientID string) Options {
	return Options{
		BrokerURL:          url,
		ClientID:           clientID,
		KeepAlive:          5 * time.Second,
		ConnectTimeout:     2 * time.Second,
		WriteTimeout:       5 * time.Second,
		Backoff:            Backoff{Initial: 20 * time.Millisecond, Max: 200 * time.Millisecond},
		FirstConnectJitter: -1,
	}
}

// newClient calls New and fails the test on error.
func newClient(t testing.TB, opts Options) *Client {
	t.Helper()
	c, err := New(opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return c
}

// start runs c until the returned stop is called (or the test ends); stop
// cancels Run, waits for it and fails the test if it returned an error.
func start(t testing.TB, c *Client) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("Run returned %v", err)
				}
			case <-time.After(30 * time.Second):
				t.Errorf("Run did not return within 30s of cancel")
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// startConnected starts c and waits until it is connected.
func startConnected(t testing.TB, c *Client) (stop func()) {
	t.Helper()
	stop = start(t, c)
	waitConnected(t, c)
	return stop
}

// publishUntilReceived publishes payload on topic until rec has it: c
// reports Connected before it has made its subscriptions on the new
// connection, so a message published at once can go unheard.
func publishUntilReceived(t testing.TB, c *Client, rec *recorder, topic, payload string) {
	t.Helper()
	checkfor.Eventually(t, 10*time.Second, 100*time.Millisecond, func() error {
		if err := c.Publish(context.Background(), topic, []byte(payload), false); err != nil {
			return fmt.Errorf("publish %s: %w", topic, err)
		}
		return rec.expect(topic, payload)
	})
}

// waitConnected waits until c is connected.
func waitConnected(t testing.TB, c *Client) {
	t.Helper()
	checkfor.Eventually(t, 10*time.Second, 10*time.Millisecond, func() error {
		if !c.Connected() {
			return fmt.Errorf("not connected; stats %+v", c.Stats())
		}
		return nil
	})
}

// recorder is a Handler that remembers the latest payload of every topic.
type recorder struct {
	mu     sync.Mutex
	latest map[string]string // guarded by mu
	all    []string          // guarded by mu: topics in delivery order
}

func newRecorder() *recorder { return &recorder{latest: map[string]string{}} }

func (r *recorder) handle(topic string, payload []byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.latest[topic] = string(payload)
	r.all = append(r.all, topic)
}

// get returns the latest payload of topic and whether any arrived.
func (r *recorder) get(topic string) (string, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	p, ok := r.latest[topic]
	return p, ok
}

// expect returns nil once topic's latest payload is want.
func (r *recorder) expect(topic, want string) error {
	got, ok := r.get(topic)
	if !ok || got != want {
		return fmt.Errorf("topic %s: got %q (received %v), want %q", topic, got, ok, want)
	}
	return nil
}

// missing returns the topics of which no message arrived.
func (r *recorder) missing(topics []string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, t := range topics {
		if _, ok := r.latest[t]; !ok {
			out = append(out, t)
		}
	}
	return out
}
