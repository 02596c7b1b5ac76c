package edgeagent_test

import (
	"context"
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

// TestAtMostOnceSubscriptionsLoseNoUpdate: a node subscribed at QoS 0
// (SubscribeAtMostOnce) whose link is down while the controller publishes
// a new desired state and its revision still converges to it: the
// reconnection subscribes again and the broker delivers the retained
// messages. The broker holds the subscriptions (desired state, log
// requests) at QoS 0, and the session is clean, so nothing but the
// retained copies could have carried the update. (A revision's
// subscription ends once it is cached, so the new one is subscribed only
// when the new desired state names it.)
func TestAtMostOnceSubscriptionsLoseNoUpdate(t *testing.T) {
	b := startBrokerNode(t)
	link := sim.NewLink(nil)
	rt := fake.New()
	rt.AddImage("busybox:1.36", "busybox:1.37")
	node, err := edgeagent.NewNode(edgeagent.NodeOptions{
		Agent: edgeagent.Config{NodeName: testNode, Ephemeral: true, ResyncInterval: 50 * time.Millisecond,
			Logger: slog.New(slog.DiscardHandler)},
		MQTT: mqttclient.Options{BrokerURLs: []string{b.url}, FirstConnectJitter: -1, Dial: link.Dial,
			Backoff: mqttclient.Backoff{Initial: 20 * time.Millisecond, Max: 200 * time.Millisecond}},
		SubscribeAtMostOnce: true,
	}, rt)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- node.Run(ctx) }()
	t.Cleanup(func() { cancel(); require.NoError(t, <-done) })

	desiredTopic := schema.NodeTopic(testNode, schema.TopicDesired)
	publish := func(gen uint64, rev schema.Revision) {
		t.Helper()
		require.NoError(t, b.srv.Publish(schema.RevisionTopic(rev.Hash), mustJSON(t, rev), true, 1))
		ds := schema.DesiredState{SchemaVersion: schema.WireVersion, Node: testNode, Generation: gen, Instances: []schema.DesiredInstance{want(rev)}}
		require.NoError(t, b.srv.Publish(desiredTopic, mustJSON(t, ds), true, 1))
	}
	runs := func(rev schema.Revision) {
		t.Helper()
		checkfor.Eventually(t, 10*time.Second, 10*time.Millisecond, func() error {
			obs, ok := node.Agent().Observed()
			if !ok || len(obs.Instances) != 1 {
				return fmt.Errorf("observed %+v, want one instance", obs)
			}
			if in := obs.Instances[0]; in.Revision != rev.Hash || runningReady(in) != nil {
				return fmt.Errorf("instance %+v, want %s running and ready", in, rev.Hash)
			}
			return nil
		})
	}

	v1 := testRevision("monitoring/exporter", testTemplate("busybox:1.36"))
	publish(1, v1)
	runs(v1)
	checkfor.Eventually(t, 10*time.Second, 10*time.Millisecond, func() error {
		cl, ok := b.srv.Clients.Get(schema.MQTTClientID(testNode))
		if !ok {
			return fmt.Errorf("broker does not know the node")
		}
		for _, filter := range []string{desiredTopic, schema.NodeTopic(testNode, schema.TopicLogsRequest)} {
			sub, ok := cl.State.Subscriptions.Get(filter)
			if !ok {
				return fmt.Errorf("no subscription to %s", filter)
			}
			if sub.Qos != 0 {
				return fmt.Errorf("subscription to %s at QoS %d, want 0", filter, sub.Qos)
			}
		}
		return nil
	})

	link.SetDown(true)
	checkfor.Eventually(t, 10*time.Second, 10*time.Millisecond, func() error {
		if node.Client().Connected() {
			return fmt.Errorf("still connected")
		}
		return nil
	})
	v2 := testRevision("monitoring/exporter", testTemplate("busybox:1.37"))
	publish(2, v2)
	link.SetDown(false)
	runs(v2)
}
