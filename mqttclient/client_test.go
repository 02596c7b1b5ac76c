package mqttclient

import (
	"context"
	"errors"
	"fmt"
	"net"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/edgeset/edgeset/internal/checkfor"
)

func TestPublishSubscribeRoundTrip(t *testing.T) {
	_, url := startMochi(t)
	rec := newRecorder()
	subOpts := testOptions(url, "sub")
	subOpts.Handler = rec.handle
	subOpts.Subscriptions = []Subscription{{Filter: "edgeset/v1/nodes/+/status", QoS: 1}}
	sub := newClient(t, subOpts)
	startConnected(t, sub)
	pub := newClient(t, testOptions(url, "pub"))
	startConnected(t, pub)
	ctx := context.Background()

	if err := pub.Publish(ctx, "edgeset/v1/nodes/n1/status", []byte("v1"), true); err != nil {
		t.Fatalf("Publish: %v", err)
	}
	checkfor.Eventually(t, 5*time.Second, 10*time.Millisecond, func() error { return rec.expect("edgeset/v1/nodes/n1/status", "v1") })

	// A runtime subscription delivers the retained message already there.
	if err := pub.Publish(ctx, "edgeset/v1/revisions/abc", []byte("rev"), true); err != nil {
		t.Fatalf("Publish: %v", err)
	}
	if err := sub.Subscribe(ctx, Subscription{Filter: "edgeset/v1/revisions/abc", QoS: 1}); err != nil {
		t.Fatalf("Subscribe: %v", err)
	}
	checkfor.Eventually(t, 5*time.Second, 10*time.Millisecond, func() error { return rec.expect("edgeset/v1/revisions/abc", "rev") })

	// After Unsubscribe new messages stop; the status topic proves delivery
	// still works and orders the check.
	if err := sub.Unsubscribe(ctx, "edgeset/v1/revisions/abc"); err != nil {
		t.Fatalf("Unsubscribe: %v", err)
	}
	if err := pub.Publish(ctx, "edgeset/v1/revisions/abc", []byte("rev2"), true); err != nil {
		t.Fatalf("Publish: %v", err)
	}
	if err := pub.Publish(ctx, "edgeset/v1/nodes/n1/status", []byte("v2"), true); err != nil {
		t.Fatalf("Publish: %v", err)
	}
	checkfor.Eventually(t, 5*time.Second, 10*time.Millisecond, func() error { return rec.expect("edgeset/v1/nodes/n1/status", "v2") })
	if got, _ := rec.get("edgeset/v1/revisions/abc"); got != "rev" {
		t.Errorf("after Unsubscribe revision = %q, want %q", got, "rev")
	}
	if st := pub.Stats(); st.Published != 4 || st.PublishErrors != 0 {
		t.Errorf("publisher stats = %+v, want 4 published, 0 errors", st)
	}
}

func TestPublishWhenDisconnected(t *testing.T) {
	// A port nothing listens on: Run keeps failing to connect.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	c := newClient(t, testOptions("tcp://"+addr, "offline"))

	tests := []struct {
		name    string
		running bool
	}{
		{"before Run", false},
		{"while Run retries", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.running {
				start(t, c)
				checkfor.Eventually(t, 5*time.Second, 10*time.Millisecond, func() error {
					if c.Stats().ConnectFailures < 2 {
						return errors.New("no connection attempts yet")
					}
					return nil
				})
			}
			err := c.Publish(context.Background(), "edgeset/v1/nodes/n1/status", []byte("x"), true)
			if !errors.Is(err, ErrNotConnected) {
				t.Fatalf("Publish = %v, want ErrNotConnected", err)
			}
			err = c.PublishAll(context.Background(), []Message{{Topic: "a", Payload: []byte("x")}})
			if !errors.Is(err, ErrNotConnected) {
				t.Fatalf("PublishAll = %v, want ErrNotConnected", err)
			}
			if c.Connected() {
				t.Fatal("Connected() = true")
			}
		})
	}
}

func TestPublishAllFanOut(t *testing.T) {
	_, url := startMochi(t)
	const n = 3000
	var got atomic.Int64
	subOpts := testOptions(url, "controller-sub")
	subOpts.Handler = func(string, []byte) { got.Add(1) }
	subOpts.Subscriptions = []Subscription{{Filter: "edgeset/v1/nodes/+/desired", QoS: 1}}
	sub := newClient(t, subOpts)
	startConnected(t, sub)
	pubOpts := testOptions(url, "controller")
	pubOpts.PublishWindow = 64
	pub := newClient(t, pubOpts)
	startConnected(t, pub)

	msgs := make([]Message, n)
	for i := range msgs {
		msgs[i] = Message{Topic: fmt.Sprintf("edgeset/v1/nodes/node-%05d/desired", i), Payload: []byte("state"), Retained: true}
	}
	if err := pub.PublishAll(context.Background(), msgs); err != nil {
		t.Fatalf("PublishAll: %v", err)
	}
	if st := pub.Stats(); st.Published != n {
		t.Errorf("Published = %d, want %d", st.Published, n)
	}
	checkfor.Eventually(t, 10*time.Second, 20*time.Millisecond, func() error {
		if got.Load() != n {
			return fmt.Errorf("subscriber has %d distinct deliveries, want %d", got.Load(), n)
		}
		return nil
	})
}

func TestWillOnAbruptLossAndReconnect(t *testing.T) {
	srv, url := startMochi(t)
	const willTopic = "edgeset/v1/nodes/n1/online"
	var wills atomic.Int64
	opts := testOptions(url, "n1")
	opts.Will = func() *Message {
		n := wills.Add(1)
		return &Message{Topic: willTopic, Payload: fmt.Appendf(nil, "offline-%d", n), Retained: true}
	}
	var connects, losses atomic.Int64
	opts.OnConnect = func(context.Context) { connects.Add(1) }
	opts.OnConnectionLost = func(error) { losses.Add(1) }
	c := newClient(t, opts)
	startConnected(t, c)
	checkfor.Eventually(t, 5*time.Second, 10*time.Millisecond, func() error {
		if connects.Load() != 1 {
			return fmt.Errorf("OnConnect called %d times, want 1", connects.Load())
		}
		return nil
	})

	cl, ok := srv.Clients.Get("n1")
	if !ok {
		t.Fatal("broker does not know client n1")
	}
	cl.Stop(errors.New("test: connection killed"))

	checkfor.Eventually(t, 5*time.Second, 10*time.Millisecond, func() error {
		msgs := srv.Topics.Messages(willTopic)
		if len(msgs) != 1 || string(msgs[0].Payload) != "offline-1" {
			return fmt.Errorf("retained will = %v, want offline-1", msgs)
		}
		return nil
	})
	checkfor.Eventually(t, 5*time.Second, 10*time.Millisecond, func() error {
		st := c.Stats()
		if connects.Load() != 2 || st.Reconnects != 1 || losses.Load() != 1 || !st.Connected {
			return fmt.Errorf("OnConnect %d, lost %d, stats %+v; want 2 connects, 1 reconnect, 1 loss", connects.Load(), losses.Load(), st)
		}
		return nil
	})
	if wills.Load() != 2 {
		t.Errorf("Will called %d times, want once per connection (2)", wills.Load())
	}
}

func TestCleanDisconnectSendsNoWill(t *testing.T) {
	srv, url := startMochi(t)
	const willTopic = "edgeset/v1/nodes/n2/online"
	opts := testOptions(url, "n2")
	opts.Will = func() *Message { return &Message{Topic: willTopic, Payload: []byte("offline"), Retained: true} }
	c := newClient(t, opts)
	stop := startConnected(t, c)
	stop()
	if c.Connected() {
		t.Error("Connected() = true after Run returned")
	}
	checkfor.Eventually(t, 5*time.Second, 10*time.Millisecond, func() error {
		if _, ok := srv.Clients.Get("n2"); ok {
			return errors.New("broker still holds client n2")
		}
		return nil
	})
	if msgs := srv.Topics.Messages(willTopic); len(msgs) != 0 {
		t.Errorf("will published on clean disconnect: %v", msgs)
	}
}

func TestRunLeavesNoGoroutines(t *testing.T) {
	_, url := startMochi(t)
	before := runtime.NumGoroutine()
	opts := testOptions(url, "leak")
	opts.Handler = func(string, []byte) {}
	opts.Subscriptions = []Subscription{{Filter: "a/#", QoS: 1}}
	opts.OnConnect = func(ctx context.Context) { <-ctx.Done() } // must be joined
	c := newClient(t, opts)
	stop := startConnected(t, c)
	if n := runtime.NumGoroutine(); n <= before {
		t.Fatalf("goroutines while running = %d, not above %d: the check below would prove nothing", n, before)
	}
	stop()
	checkfor.Eventually(t, 5*time.Second, 20*time.Millisecond, func() error {
		if n := runtime.NumGoroutine(); n > before {
			return fmt.Errorf("%d goroutines after Run returned, %d before", n, before)
		}
		return nil
	})
	if err := c.Run(context.Background()); !errors.Is(err, ErrAlreadyRunning) {
		t.Errorf("second Run = %v, want ErrAlreadyRunning", err)
	}
}

func TestOnConnectCallsDoNotOverlap(t *testing.T) {
	srv, url := startMochi(t)
	var active, overlaps, calls atomic.Int64
	opts := testOptions(url, "overlap")
	opts.OnConnect = func(ctx context.Context) {
		if active.Add(1) > 1 {
			overlaps.Add(1)
		}
		defer active.Add(-1)
		calls.Add(1)
		<-ctx.Done()
		time.Sleep(50 * time.Millisecond) // a slow republish ignoring ctx a while
	}
	c := newClient(t, opts)
	startConnected(t, c)
	for i := 1; i <= 3; i++ {
		checkfor.Eventually(t, 5*time.Second, 10*time.Millisecond, func() error {
			if calls.Load() != int64(i) {
				return fmt.Errorf("OnConnect calls = %d, want %d", calls.Load(), i)
			}
			return nil
		})
		cl, ok := srv.Clients.Get("overlap")
		if !ok {
			t.Fatal("broker does not know the client")
		}
		cl.Stop(errors.New("test: kill"))
	}
	if overlaps.Load() != 0 {
		t.Errorf("OnConnect overlapped %d times", overlaps.Load())
	}
}
