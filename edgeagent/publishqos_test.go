package edgeagent_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/edgeset/edgeset/edgeagent"
	"github.com/edgeset/edgeset/edgeagent/fake"
	"github.com/edgeset/edgeset/internal/checkfor"
	"github.com/edgeset/edgeset/mqttclient"
	"github.com/edgeset/edgeset/schema"
	"github.com/edgeset/edgeset/sim"
)

// TestAtMostOnceReportsLoseNoState: a node publishing at QoS 0
// (PublishAtMostOnce) leaves its presence, status and observed state on
// the broker as retained QoS 0 messages, its will stays QoS 1, and a
// report it could not send while its link was down (a new desired state
// applied meanwhile) reaches the broker after the reconnection, because
// every connection reports the state as it is then.
func TestAtMostOnceReportsLoseNoState(t *testing.T) {
	b := startBrokerNode(t)
	link := sim.NewLink(nil)
	rt := fake.New()
	rt.AddImage("busybox:1.36", "busybox:1.37")
	node, err := edgeagent.NewNode(edgeagent.NodeOptions{
		Agent: edgeagent.Config{NodeName: testNode, Ephemeral: true, ResyncInterval: 50 * time.Millisecond,
			Logger: slog.New(slog.DiscardHandler)},
		MQTT: mqttclient.Options{BrokerURLs: []string{b.url}, FirstConnectJitter: -1, Dial: link.Dial,
			Backoff: mqttclient.Backoff{Initial: 20 * time.Millisecond, Max: 200 * time.Millisecond}},
		PublishAtMostOnce: true,
	}, rt)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- node.Run(ctx) }()
	t.Cleanup(func() { cancel(); require.NoError(t, <-done) })

	v1 := testRevision("monitoring/exporter", testTemplate("busybox:1.36"))
	publishDesired(t, b, 1, v1)
	reported := func(rev schema.Revision) {
		t.Helper()
		checkfor.Eventually(t, 10*time.Second, 10*time.Millisecond, func() error { return b.reportsRunning(rev) })
	}
	reported(v1)
	for _, kind := range []string{schema.TopicOnline, schema.TopicStatus, schema.TopicObserved} {
		msgs := b.srv.Topics.Messages(schema.NodeTopic(testNode, kind))
		require.Len(t, msgs, 1, kind)
		require.Zero(t, msgs[0].FixedHeader.Qos, "retained %s published at QoS %d, want 0", kind, msgs[0].FixedHeader.Qos)
	}
	cl, ok := b.srv.Clients.Get(schema.MQTTClientID(testNode))
	require.True(t, ok, "broker knows the node")
	require.Equal(t, byte(1), cl.Properties.Will.Qos, "the will stays QoS 1")

	link.SetDown(true)
	checkfor.Eventually(t, 10*time.Second, 10*time.Millisecond, func() error {
		if node.Client().Connected() {
			return fmt.Errorf("still connected")
		}
		return nil
	})
	v2 := testRevision("monitoring/exporter", testTemplate("busybox:1.37"))
	publishDesired(t, b, 2, v2)
	link.SetDown(false)
	reported(v2)
}

// publishDesired publishes rev and a desired state of generation gen
// running it on testNode, both retained, as the controller does.
func publishDesired(t *testing.T, b brokerNode, gen uint64, rev schema.Revision) {
	t.Helper()
	require.NoError(t, b.srv.Publish(schema.RevisionTopic(rev.Hash), mustJSON(t, rev), true, 1))
	ds := schema.DesiredState{SchemaVersion: schema.WireVersion, Node: testNode, Generation: gen, Instances: []schema.DesiredInstance{want(rev)}}
	require.NoError(t, b.srv.Publish(schema.NodeTopic(testNode, schema.TopicDesired), mustJSON(t, ds), true, 1))
}

// reportsRunning reports an error until testNode's retained observed
// state on b shows rev running and ready.
func (b brokerNode) reportsRunning(rev schema.Revision) error {
	msgs := b.srv.Topics.Messages(schema.NodeTopic(testNode, schema.TopicObserved))
	if len(msgs) != 1 {
		return fmt.Errorf("%d retained observed states", len(msgs))
	}
	var obs schema.ObservedState
	if err := json.Unmarshal(msgs[0].Payload, &obs); err != nil {
		return err
	}
	if len(obs.Instances) != 1 {
		return fmt.Errorf("observed %+v, want one instance", obs)
	}
	if in := obs.Instances[0]; in.Revision != rev.Hash || runningReady(in) != nil {
		return fmt.Errorf("reported instance %+v, want %s running and ready", in, rev.Hash)
	}
	return nil
}
