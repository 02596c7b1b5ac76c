package natsauth_test

import (
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	mqtt "github.com/eclipse/paho.mqtt.golang"
	"github.com/stretchr/testify/require"
	"golang.org/x/sync/errgroup"

	"github.com/edgeset/edgeset/internal/checkfor"
	"github.com/edgeset/edgeset/internal/natstest"
	"github.com/edgeset/edgeset/schema"
)

// TestConsumersPerSubscription measures what issue 15 asks: nats-server
// creates a JetStream consumer (on the $MQTT_msgs stream) for each QoS 1
// subscription, none for a QoS 0 one. EDGESET_NATS_CLIENTS sets the number
// of node clients per QoS (default 20); the figures are logged.
func TestConsumersPerSubscription(t *testing.T) {
	n := 20
	if v := os.Getenv("EDGESET_NATS_CLIENTS"); v != "" {
		var err error
		n, err = strconv.Atoi(v)
		require.NoError(t, err, "EDGESET_NATS_CLIENTS")
	}
	f := startFleet(t, nil)
	for _, qos := range []byte{0, 1} {
		before := consumers(t, f.cluster.Procs[0])
		start := time.Now()
		f.subscribeNodes(t, n, qos)
		elapsed := time.Since(start)
		want := before[msgsStream]
		if qos == 1 {
			want += n
		}
		var after map[string]int
		checkfor.Eventually(t, waitFor, 20*time.Millisecond, func() error {
			after = consumers(t, f.cluster.Procs[0])
			if after[msgsStream] != want {
				return fmt.Errorf("%s has %d consumers, want %d", msgsStream, after[msgsStream], want)
			}
			return nil
		})
		t.Logf("QoS %d: %d clients connected and subscribed in %s; consumers before %v, after %v; replicas of %s consumers: %v",
			qos, n, elapsed.Round(time.Millisecond), before, after, msgsStream, consumerReplicas(t, f.cluster.Procs[0]))
	}
}

// msgsStream is the stream nats-server delivers QoS 1 and 2 messages from.
const msgsStream = "$MQTT_msgs"

// subscribeNodes connects n nodes (8 at a time), spread over the servers,
// each subscribed to its desired state at qos; they stay connected until
// the test ends.
func (f *fleet) subscribeNodes(t *testing.T, n int, qos byte) {
	t.Helper()
	var g errgroup.Group
	g.SetLimit(8)
	for i := range n {
		g.Go(func() error {
			node := fmt.Sprintf("q%d-node-%d", qos, i)
			c, err := f.connect(i%len(f.cluster.Procs), node, node, f.token(node), nil)
			if err != nil {
				return fmt.Errorf("connect %s: %w", node, err)
			}
			t.Cleanup(func() { c.Disconnect(0) })
			topic := schema.NodeTopic(node, schema.TopicDesired)
			tok := c.Subscribe(topic, qos, nil)
			if !tok.WaitTimeout(waitFor) || tok.Error() != nil {
				return fmt.Errorf("subscribe %s: %v", topic, tok.Error())
			}
			if code := tok.(*mqtt.SubscribeToken).Result()[topic]; code != qos {
				return fmt.Errorf("subscribe %s: SUBACK %#x", topic, code)
			}
			return nil
		})
	}
	require.NoError(t, g.Wait())
}

// consumers returns the consumer count of every stream of the edgeset
// account, as server s reports it (/jsz).
func consumers(t *testing.T, s *natstest.Proc) map[string]int {
	t.Helper()
	streams, err := s.Streams(natstest.Account, false)
	require.NoError(t, err)
	counts := map[string]int{}
	for _, st := range streams {
		counts[st.Name] = st.State.Consumers
	}
	return counts
}

// consumerReplicas counts the consumers of msgsStream by their number of
// replicas, as server s reports them (/jsz?consumers=true).
func consumerReplicas(t *testing.T, s *natstest.Proc) map[int]int {
	t.Helper()
	streams, err := s.Streams(natstest.Account, true)
	require.NoError(t, err)
	counts := map[int]int{}
	for _, st := range streams {
		if st.Name != msgsStream {
			continue
		}
		for _, c := range st.Consumers {
			r := 1
			if c.Cluster != nil {
				r = 1 + len(c.Cluster.Replicas)
			}
			counts[r]++
		}
	}
	return counts
}
