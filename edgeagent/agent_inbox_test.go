package edgeagent

import (
	"testing"

	"github.com/edgeset/edgeset/schema"
)

// TestInboxKeepsNewestDesiredGeneration: a stale desired state arriving
// after a newer one, before the loop takes it, does not replace it.
func TestInboxKeepsNewestDesiredGeneration(t *testing.T) {
	a := &Agent{inbox: map[string][]byte{}, wake: make(chan struct{}, 1)}
	topic := schema.NodeTopic("gw", schema.TopicDesired)
	a.HandleMessage(topic, []byte(`{"schemaVersion":1,"node":"gw","generation":3,"instances":[]}`))
	a.HandleMessage(topic, []byte(`{"schemaVersion":1,"node":"gw","generation":2,"instances":[]}`))
	if got := string(a.inbox[topic]); got != `{"schemaVersion":1,"node":"gw","generation":3,"instances":[]}` {
		t.Fatalf("pending desired state %s, want generation 3", got)
	}
	a.HandleMessage(topic, []byte(`{"schemaVersion":1,"node":"gw","generation":4,"instances":[]}`))
	if got := string(a.inbox[topic]); got != `{"schemaVersion":1,"node":"gw","generation":4,"instances":[]}` {
		t.Fatalf("pending desired state %s, want generation 4", got)
	}
	a.HandleMessage(topic, []byte(`garbage`))
	if got := string(a.inbox[topic]); got != "garbage" {
		t.Fatalf("garbage must still reach the loop (to be counted and dropped), got %s", got)
	}
}
