package natsauth_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgeset/edgeset/mqttclient"
	"github.com/edgeset/edgeset/schema"
)

// subAckFailure is the SUBACK return code of a refused filter.
const subAckFailure = 0x80

// TestNodeSubscriptions: what a node may subscribe to on the cluster. The
// SUBACK codes are what nats-server v2.15.2 answers; refused filters get
// 0x80 and the connection stays up.
func TestNodeSubscriptions(t *testing.T) {
	f := startFleet(t, nil)
	n1, err := f.dial(t, 1, "n1", "n1", f.token("n1"), newInbox())
	require.NoError(t, err)
	tests := []struct {
		filter  string
		allowed bool
	}{
		{"edgeset/v1/nodes/n1/desired", true},
		{"edgeset/v1/nodes/n1/logs/request", true},
		{"edgeset/v1/nodes/n1/secrets/f00d", true},
		{"edgeset/v1/revisions/0123abcd", true},
		{"edgeset/v1/configmaps/0123abcd", true},
		{"edgeset/v1/nodes/n2/desired", false},
		{"edgeset/v1/nodes/n2/secrets/f00d", false},
		{"edgeset/v1/nodes/n2/logs/request", false},
		{"edgeset/v1/nodes/n2/exec/input/5e0c", false},
		{"edgeset/v1/nodes/n1/exec/input/5e0c", true},
		{"edgeset/v1/nodes/n1/exec/input/#", false},
		{"edgeset/v1/nodes/n1/status", false}, // its own, write-only
		{"edgeset/v1/nodes/+/desired", false},
		{"edgeset/v1/nodes/+/secrets/f00d", false},
		{"edgeset/v1/nodes/n1/#", false},
		{"edgeset/v1/nodes/n1/secrets/#", false},
		{"edgeset/#", false},
		{"#", false},
		{"+/v1/nodes/n1/desired", false},
		{"$share/g/edgeset/v1/nodes/n1/desired", false},
		{"$share/g/edgeset/v1/nodes/n2/desired", false},
		{"$share/g/#", false},
		{"$share/g/edgeset/v1/nodes/n1", false},
		{"$SYS/#", false},
		{"$MQTT/msgs/#", false},
		// Where NATS differs from the embedded broker: a permission ending
		// in '*' also admits '+' at that level (docs/scale-out.md).
		{"edgeset/v1/revisions/+", true},
		{"edgeset/v1/configmaps/+", true},
		{"edgeset/v1/nodes/n1/secrets/+", true},
		{"edgeset/v1/nodes/n1/exec/input/+", true},
	}
	for _, tc := range tests {
		for _, qos := range []byte{0, 1} {
			code := subscribeCode(t, n1, tc.filter, qos)
			if tc.allowed {
				assert.Equal(t, qos, code, "%s at QoS %d", tc.filter, qos)
			} else {
				assert.Equal(t, byte(subAckFailure), code, "%s at QoS %d", tc.filter, qos)
			}
		}
	}
	assert.True(t, n1.IsConnectionOpen(), "a refused subscription does not close the connection")
}

// TestOtherNodesMessagesNeverDelivered: a node whose subscriptions to
// another node's desired state and secrets were refused receives none of
// them. Its own desired state, published after them by the controller on
// the same connection, is the fence: NATS keeps one publisher's order.
func TestOtherNodesMessagesNeverDelivered(t *testing.T) {
	f := startFleet(t, nil)
	ctx := context.Background()
	ctl := f.controller(t, 0, newInbox())
	in := newInbox()
	n1, err := f.dial(t, 2, "n1", "n1", f.token("n1"), in)
	require.NoError(t, err)
	other := []string{
		schema.NodeTopic("n2", schema.TopicDesired),
		schema.NodeSecretTopic("n2", "f00d"),
	}
	for _, topic := range other {
		assert.Equal(t, byte(subAckFailure), subscribeCode(t, n1, topic, 1), topic)
	}
	for _, filter := range []string{"#", "edgeset/v1/nodes/+/desired", "edgeset/v1/nodes/+/secrets/f00d"} {
		assert.Equal(t, byte(subAckFailure), subscribeCode(t, n1, filter, 0), filter)
	}
	own := schema.NodeTopic("n1", schema.TopicDesired)
	assert.Equal(t, byte(1), subscribeCode(t, n1, own, 1))
	for _, topic := range other {
		require.NoError(t, ctl.Publish(ctx, topic, []byte("secret"), false))
	}
	require.NoError(t, ctl.Publish(ctx, own, []byte("fence"), false))
	got := in.await(t, own, "fence")
	assert.Equal(t, []received{{own, "fence"}}, got)
}

// TestNodePublishRefused: a node's publishes to another node's topics, or
// to its own read-only ones, at QoS 0 and QoS 1, never reach the
// controller. Unlike the embedded broker, nats-server acknowledges a
// forbidden QoS 1 publish (PUBACK) and keeps the connection open.
func TestNodePublishRefused(t *testing.T) {
	f := startFleet(t, nil)
	in := newInbox()
	f.controller(t, 0, in,
		mqttclient.Subscription{Filter: "edgeset/v1/nodes/+/status", QoS: 1},
		mqttclient.Subscription{Filter: "edgeset/v1/nodes/+/desired", QoS: 1},
	)
	n1, err := f.dial(t, 1, "n1", "n1", f.token("n1"), nil)
	require.NoError(t, err)
	forbidden := []string{
		schema.NodeTopic("n2", schema.TopicStatus),
		schema.NodeTopic("n1", schema.TopicDesired),
	}
	for _, topic := range forbidden {
		publish(t, n1, topic, 0, false, "forged-qos0")
		publish(t, n1, topic, 1, true, "forged-qos1")
	}
	own := schema.NodeTopic("n1", schema.TopicStatus)
	publish(t, n1, own, 1, true, "fence")
	got := in.await(t, own, "fence")
	assert.Equal(t, []received{{own, "fence"}}, got)
	assert.True(t, n1.IsConnectionOpen(), "a forbidden QoS 1 publish does not close the connection")
}
