package edgeagent

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/edgeset/edgeset/schema"
	"github.com/edgeset/edgeset/signing"
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

// TestInboxKeepsNewestSignedDesiredGeneration: the same for signed
// desired states, whose generation is their statement's.
func TestInboxKeepsNewestSignedDesiredGeneration(t *testing.T) {
	priv, err := signing.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	signer := signing.NewSigner(priv)
	topic := schema.NodeTopic("gw", schema.TopicDesired)
	signed := func(gen uint64) []byte {
		body := fmt.Sprintf(`{"schemaVersion":1,"node":"gw","generation":%d,"instances":[]}`, gen)
		env, err := signer.Sign(signing.Statement{Topic: topic, Node: "gw", Generation: gen, IssuedAt: time.Now(),
			ExpiresAt: time.Now().Add(time.Hour), Body: json.RawMessage(body)})
		if err != nil {
			t.Fatal(err)
		}
		return env
	}
	a := &Agent{inbox: map[string][]byte{}, wake: make(chan struct{}, 1)}
	three, two, four := signed(3), signed(2), signed(4)
	a.HandleMessage(topic, three)
	a.HandleMessage(topic, two)
	if string(a.inbox[topic]) != string(three) {
		t.Fatal("a signed generation 2 replaced the pending generation 3")
	}
	a.HandleMessage(topic, four)
	if string(a.inbox[topic]) != string(four) {
		t.Fatal("a signed generation 4 did not replace the pending generation 3")
	}
}
