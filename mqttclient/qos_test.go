package mqttclient

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	mochi "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/packets"

	"github.com/edgeset/edgeset/internal/checkfor"
)

// qosRecorder is a broker hook that records the QoS of every PUBLISH a
// client sends, by topic.
type qosRecorder struct {
	mochi.HookBase
	mu  sync.Mutex // guards qos
	qos map[string]byte
}

func (h *qosRecorder) ID() string { return "qos-recorder" }

func (h *qosRecorder) Provides(b byte) bool { return b == mochi.OnPublish }

func (h *qosRecorder) OnPublish(_ *mochi.Client, pk packets.Packet) (packets.Packet, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.qos[pk.TopicName] = pk.FixedHeader.Qos
	return pk, nil
}

// received returns the QoS topic was published at, an error before it was.
func (h *qosRecorder) received(topic string) (byte, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	q, ok := h.qos[topic]
	if !ok {
		return 0, fmt.Errorf("no PUBLISH on %s yet", topic)
	}
	return q, nil
}

// TestPublishAtMostOnce: Publish and PublishAll send QoS 1 by default and
// QoS 0 with PublishAtMostOnce; the will stays QoS 1 either way (a
// nats-server cluster stores every QoS 1 PUBLISH in JetStream, so an
// agent on one publishes its state at QoS 0).
func TestPublishAtMostOnce(t *testing.T) {
	tests := []struct {
		name       string
		atMostOnce bool
		want       byte
	}{
		{"default QoS 1", false, 1},
		{"PublishAtMostOnce", true, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv, url := startMochi(t)
			rec := &qosRecorder{qos: map[string]byte{}}
			if err := srv.AddHook(rec, nil); err != nil {
				t.Fatal(err)
			}
			opts := testOptions(url, "node-1")
			opts.PublishAtMostOnce = tc.atMostOnce
			opts.Will = func() *Message {
				return &Message{Topic: "edgeset/v1/nodes/node-1/online", Payload: []byte("off"), Retained: true}
			}
			c := newClient(t, opts)
			startConnected(t, c)
			ctx := context.Background()
			if err := c.Publish(ctx, "edgeset/v1/nodes/node-1/status", []byte("s"), true); err != nil {
				t.Fatalf("Publish: %v", err)
			}
			if err := c.PublishAll(ctx, []Message{{Topic: "edgeset/v1/nodes/node-1/observed", Payload: []byte("o"), Retained: true}}); err != nil {
				t.Fatalf("PublishAll: %v", err)
			}
			for _, topic := range []string{"edgeset/v1/nodes/node-1/status", "edgeset/v1/nodes/node-1/observed"} {
				checkfor.Eventually(t, 5*time.Second, 10*time.Millisecond, func() error {
					_, err := rec.received(topic)
					return err
				})
				if got, _ := rec.received(topic); got != tc.want {
					t.Errorf("%s published at QoS %d, want %d", topic, got, tc.want)
				}
			}
			if st := c.Stats(); st.Published != 2 || st.PublishErrors != 0 {
				t.Errorf("stats %+v, want 2 published, no errors", st)
			}
			// The will: the broker's copy of this connection's.
			cl, ok := srv.Clients.Get("node-1")
			if !ok {
				t.Fatal("broker has no client node-1")
			}
			if q := cl.Properties.Will.Qos; q != 1 {
				t.Errorf("will QoS %d, want 1", q)
			}
		})
	}
}
