package mqttclient

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/edgeset/edgeset/internal/checkfor"
	"github.com/edgeset/edgeset/test/mosquitto"
)

// Interoperability tests against a real Mosquitto (skipped when it is not
// installed, unless CI=true or EDGESET_REQUIRE_MOSQUITTO=1).

const controllerPassword = "controller-secret"

// startMosquitto starts Mosquitto with a controller user.
func startMosquitto(t *testing.T) *mosquitto.Server {
	t.Helper()
	return mosquitto.Start(t, mosquitto.Config{Users: map[string]string{"controller": controllerPassword}})
}

// controllerOptions returns test options authenticating as the controller.
func controllerOptions(srv *mosquitto.Server, clientID string) Options {
	o := testOptions(srv.URL(), clientID)
	o.Username, o.Password = "controller", controllerPassword
	return o
}

func TestMosquittoSlowHandlerNeverBlocksPaho(t *testing.T) {
	srv := startMosquitto(t)
	const topics, rounds = 500, 10
	rec := newRecorder()
	release := make(chan struct{})
	var releaseOnce sync.Once
	open := func() { releaseOnce.Do(func() { close(release) }) }

	subOpts := controllerOptions(srv, "slow-sub")
	subOpts.Handler = func(topic string, payload []byte) {
		<-release // blocked until every message has been received
		rec.handle(topic, payload)
	}
	subOpts.Subscriptions = []Subscription{{Filter: "edgeset/v1/nodes/+/status", QoS: 1}}
	sub := newClient(t, subOpts)
	startConnected(t, sub)
	t.Cleanup(open) // runs before Run is stopped, so the consumer can exit
	pub := newClient(t, controllerOptions(srv, "burst-pub"))
	startConnected(t, pub)

	var msgs []Message
	for r := range rounds {
		for i := range topics {
			msgs = append(msgs, Message{Topic: statusTopic(i), Payload: fmt.Appendf(nil, "round-%d", r), Retained: true})
		}
	}
	if err := pub.PublishAll(context.Background(), msgs); err != nil {
		t.Fatalf("PublishAll: %v", err)
	}
	// Paho keeps receiving (and acknowledging) while Handler is stuck.
	checkfor.Eventually(t, 30*time.Second, 20*time.Millisecond, func() error {
		if st := sub.Stats(); st.Received < rounds*topics {
			return fmt.Errorf("received %d of %d while the handler is blocked; stats %+v", st.Received, rounds*topics, st)
		}
		return nil
	})
	open()
	want := fmt.Sprintf("round-%d", rounds-1)
	checkfor.Eventually(t, 30*time.Second, 20*time.Millisecond, func() error {
		for i := range topics {
			if err := rec.expect(statusTopic(i), want); err != nil {
				return err
			}
		}
		return nil
	})
	checkfor.Eventually(t, 5*time.Second, 10*time.Millisecond, func() error {
		if p := sub.Stats().Pending; p != 0 {
			return fmt.Errorf("%d messages pending", p)
		}
		return nil
	})
	st := sub.Stats()
	rec.mu.Lock()
	delivered := uint64(len(rec.all))
	rec.mu.Unlock()
	if st.Coalesced == 0 || st.Dropped != 0 {
		t.Errorf("stats %+v: want coalesced > 0 and nothing dropped", st)
	}
	if st.Received != st.Coalesced+delivered {
		t.Errorf("received %d != coalesced %d + delivered %d", st.Received, st.Coalesced, delivered)
	}
	if !st.Connected || st.Reconnects != 0 {
		t.Errorf("stats %+v: the connection should have stayed up", st)
	}
}

func TestMosquittoReconnectAfterRestart(t *testing.T) {
	srv := startMosquitto(t)
	rec := newRecorder()
	var connects atomic.Int64
	subOpts := controllerOptions(srv, "restart-sub")
	subOpts.Handler = rec.handle
	subOpts.Subscriptions = []Subscription{{Filter: "edgeset/v1/nodes/+/status", QoS: 1}}
	subOpts.OnConnect = func(context.Context) { connects.Add(1) }
	sub := newClient(t, subOpts)
	startConnected(t, sub)
	pub := newClient(t, controllerOptions(srv, "restart-pub"))
	startConnected(t, pub)
	ctx := context.Background()

	if err := pub.Publish(ctx, statusTopic(1), []byte("before"), true); err != nil {
		t.Fatalf("Publish: %v", err)
	}
	checkfor.Eventually(t, 5*time.Second, 10*time.Millisecond, func() error { return rec.expect(statusTopic(1), "before") })

	srv.Restart()

	checkfor.Eventually(t, 20*time.Second, 20*time.Millisecond, func() error {
		st := sub.Stats()
		if connects.Load() != 2 || st.Reconnects != 1 || !st.Connected {
			return fmt.Errorf("OnConnect called %d times, stats %+v; want 2 and 1 reconnect", connects.Load(), st)
		}
		return nil
	})
	// The publisher reconnects on its own schedule; until then Publish
	// fails fast with ErrNotConnected, as callers expect.
	checkfor.Eventually(t, 20*time.Second, 20*time.Millisecond, func() error {
		err := pub.Publish(ctx, statusTopic(1), []byte("after"), true)
		if err != nil && !errors.Is(err, ErrNotConnected) {
			t.Fatalf("Publish after restart: %v", err)
		}
		return err
	})
	// Delivery proves the subscription was renewed on the new connection.
	checkfor.Eventually(t, 5*time.Second, 10*time.Millisecond, func() error { return rec.expect(statusTopic(1), "after") })
}

// statusTopic is node i's status topic.
func statusTopic(i int) string { return fmt.Sprintf("edgeset/v1/nodes/node-%03d/status", i) }
