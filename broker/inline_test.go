package broker

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/edgeset/edgeset/internal/checkfor"
	"github.com/edgeset/edgeset/schema"
)

// TestInlineSubscribeSeesEveryRetainedStatus: the in-process subscription
// the embedded controller uses gets every node's retained status, far more
// than a network client's outbound queue holds, and nothing is dropped.
func TestInlineSubscribeSeesEveryRetainedStatus(t *testing.T) {
	tb := startBroker(t, Options{Limits: Limits{MaxPendingWrites: 16}})
	const nodes = 40
	for i := range nodes {
		name := fmt.Sprintf("node-%02d", i)
		cl := mustDial(t, tb.Addr(), tb.node(name))
		publish(t, cl, schema.NodeTopic(name, schema.TopicStatus), 1, true, name)
		cl.Disconnect(0)
	}
	var mu sync.Mutex
	got := map[string]string{}
	err := tb.Subscribe(schema.NodeWildcard(schema.TopicStatus), 1, func(topic string, payload []byte) {
		mu.Lock()
		defer mu.Unlock()
		got[topic] = string(payload)
	})
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	n := len(got)
	mu.Unlock()
	if n != nodes {
		t.Fatalf("inline subscription got %d retained statuses before Subscribe returned, want %d", n, nodes)
	}
	if tb.Stats().Dropped != 0 {
		t.Fatalf("dropped %d messages", tb.Stats().Dropped)
	}
}

// TestInlinePublishReachesNode: a desired state published in-process is
// retained and delivered to the node, and the node's ACL still applies to
// what it reads.
func TestInlinePublishReachesNode(t *testing.T) {
	tb := startBroker(t, Options{})
	desiredA := schema.NodeTopic("node-a", schema.TopicDesired)
	desiredB := schema.NodeTopic("node-b", schema.TopicDesired)
	if err := tb.Publish(desiredA, []byte("for a"), true); err != nil {
		t.Fatal(err)
	}
	if err := tb.Publish(desiredB, []byte("for b"), true); err != nil {
		t.Fatal(err)
	}
	a := mustDial(t, tb.Addr(), tb.node("node-a"))
	var in inbox
	subscribe(t, a, desiredA, &in)
	checkfor.Eventually(t, wait, 10*time.Millisecond, in.has(desiredA, "for a"))
	if code := subscribe(t, a, desiredB, &in); code != 0x80 {
		t.Fatalf("node-a subscribing to node-b's desired state: SUBACK %#x, want 0x80", code)
	}
	for _, m := range in.all() {
		if m.topic == desiredB {
			t.Fatalf("node-a received node-b's desired state")
		}
	}
}
