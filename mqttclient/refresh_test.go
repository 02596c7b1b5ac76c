package mqttclient

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/edgeset/edgeset/internal/checkfor"
	"github.com/edgeset/edgeset/test/mosquitto"
)

const testFence = "edgeset/v1/controller/fence"

// TestRefreshRecoversWhatASmallQueueDropped: Mosquitto with a per-client
// queue far smaller than the fleet drops most of the retained replay that a
// wildcard subscription asks for. Refresh, a few topics at a time behind a
// fence, has every retained message delivered, and leaves no subscription
// behind.
func TestRefreshRecoversWhatASmallQueueDropped(t *testing.T) {
	srv := mosquitto.Start(t, mosquitto.Config{
		Users:               map[string]string{"controller": controllerPassword},
		MaxInflightMessages: 2,
		MaxQueuedMessages:   10,
	})
	const n = 300
	pub := newClient(t, controllerOptions(srv, "refresh-pub"))
	startConnected(t, pub)
	ctx := context.Background()
	msgs := make([]Message, n)
	topics := make([]string, n)
	for i := range msgs {
		topics[i] = statusTopic(i)
		msgs[i] = Message{Topic: topics[i], Payload: fmt.Appendf(nil, "v-%d", i), Retained: true}
	}
	if err := pub.PublishAll(ctx, msgs); err != nil {
		t.Fatalf("PublishAll: %v", err)
	}

	rec := newRecorder()
	subOpts := controllerOptions(srv, "refresh-sub")
	subOpts.Handler = rec.handle
	subOpts.Subscriptions = []Subscription{{Filter: "edgeset/v1/nodes/+/status", QoS: 1}}
	sub := newClient(t, subOpts)
	startConnected(t, sub)
	// The replay of n retained messages overflows the queue of 2 + 10:
	// the drop notice is logged and most topics never arrive.
	checkfor.Eventually(t, 10*time.Second, 50*time.Millisecond, func() error {
		if !strings.Contains(srv.Log(), "Outgoing messages are being dropped") {
			return errors.New("mosquitto has not dropped anything yet")
		}
		return nil
	})
	time.Sleep(200 * time.Millisecond) // let what survived arrive
	missing := len(rec.missing(topics))
	if missing == 0 {
		t.Fatalf("the replay lost nothing; the queue is not small enough to test Refresh")
	}
	t.Logf("after the replay %d of %d retained statuses are missing", missing, n)

	if err := sub.Refresh(ctx, topics, 8, testFence); err != nil {
		t.Fatalf("Refresh: %v", err)
	}
	checkfor.Eventually(t, 10*time.Second, 20*time.Millisecond, func() error {
		if m := rec.missing(topics); len(m) > 0 {
			return fmt.Errorf("%d topics still missing after Refresh, e.g. %s", len(m), m[0])
		}
		return nil
	})
	for i, topic := range topics {
		if err := rec.expect(topic, fmt.Sprintf("v-%d", i)); err != nil {
			t.Error(err)
		}
	}
	if got, ok := rec.get(testFence); ok {
		t.Errorf("fence marker %q reached the Handler", got)
	}
	if st := sub.Stats(); st.Refreshed != n {
		t.Errorf("Stats().Refreshed = %d, want %d", st.Refreshed, n)
	}

	// Refresh left no subscription behind: a message on a topic outside
	// the wildcard but refreshed before is not delivered, while the
	// wildcard still is.
	other := "edgeset/v1/revisions/r1"
	if err := pub.Publish(ctx, other, []byte("r1"), true); err != nil {
		t.Fatal(err)
	}
	if err := sub.Refresh(ctx, []string{other}, 8, testFence); err != nil {
		t.Fatalf("Refresh: %v", err)
	}
	checkfor.Eventually(t, 5*time.Second, 20*time.Millisecond, func() error { return rec.expect(other, "r1") })
	if err := pub.Publish(ctx, other, []byte("r2"), true); err != nil {
		t.Fatal(err)
	}
	if err := pub.Publish(ctx, topics[0], []byte("after"), true); err != nil {
		t.Fatal(err)
	}
	checkfor.Eventually(t, 5*time.Second, 20*time.Millisecond, func() error { return rec.expect(topics[0], "after") })
	if got, _ := rec.get(other); got != "r1" {
		t.Errorf("%s = %q after Refresh ended, want %q (still subscribed)", other, got, "r1")
	}
}

func TestRefreshRejectsBadInput(t *testing.T) {
	_, url := startMochi(t)
	c := newClient(t, testOptions(url, "refresh-bad"))
	ctx := context.Background()
	if err := c.Refresh(ctx, []string{"a/b"}, 8, testFence); !errors.Is(err, ErrNotConnected) {
		t.Errorf("Refresh before Run = %v, want ErrNotConnected", err)
	}
	startConnected(t, c)
	tests := []struct {
		name   string
		topics []string
		batch  int
		fence  string
	}{
		{"zero batch", []string{"a/b"}, 0, testFence},
		{"wildcard topic", []string{"a/+"}, 8, testFence},
		{"empty topic", []string{""}, 8, testFence},
		{"wildcard fence", []string{"a/b"}, 8, "f/#"},
		{"empty fence", []string{"a/b"}, 8, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := c.Refresh(ctx, tc.topics, tc.batch, tc.fence); err == nil || errors.Is(err, ErrNotConnected) {
				t.Errorf("Refresh = %v, want a validation error", err)
			}
		})
	}
}
