package interop

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/edgeset/edgeset/controller/api"
	"github.com/edgeset/edgeset/internal/checkfor"
	"github.com/edgeset/edgeset/mqttclient"
	"github.com/edgeset/edgeset/schema"
	"github.com/edgeset/edgeset/test/mosquitto"
)

const exporter = "monitoring/exporter"

// exporterManifest is a daemonset for every node labelled role=gateway,
// running image.
func exporterManifest(image string) string {
	return fmt.Sprintf(`apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: exporter
  namespace: monitoring
spec:
  selector:
    matchLabels: {app: exporter}
  template:
    metadata:
      labels: {app: exporter}
    spec:
      nodeSelector:
        role: gateway
      containers:
      - name: exporter
        image: %s
`, image)
}

var gatewayLabels = map[string]string{"role": "gateway"}

// TestFleetOverMosquitto runs the controller and a real agent through a real
// Mosquitto (password file of tokens, pattern ACL) and checks the behaviour
// known from the embedded broker: the node announces itself, gets its
// desired state and the revision's template, runs the daemon and reports it
// ready; after a broker restart an update still converges.
func TestFleetOverMosquitto(t *testing.T) {
	f := startFleet(t, []string{"gw-1"}, mosquitto.Config{})
	gw := f.startAgent("gw-1", gatewayLabels)
	ctx := context.Background()

	checkfor.Eventually(t, wait, 50*time.Millisecond, func() error {
		n, err := f.api.GetNode(ctx, "gw-1")
		if err != nil {
			return fmt.Errorf("node not registered: %w", err)
		}
		if !n.Online || n.Labels["role"] != "gateway" {
			return fmt.Errorf("node online=%t labels=%v, want online with role=gateway", n.Online, n.Labels)
		}
		return nil
	})

	f.apply(exporterManifest("registry.local/exporter:1.0"))
	checkfor.Eventually(t, wait, 50*time.Millisecond, func() error {
		if err := gw.expectRunning("registry.local/exporter:1.0"); err != nil {
			return err
		}
		return expectConverged(ctx, f.api, "gw-1")
	})

	url := f.broker.URL()
	f.broker.Restart()
	if f.broker.URL() != url {
		t.Fatalf("broker moved from %s to %s", url, f.broker.URL())
	}
	// Applied while the controller may still be reconnecting: the publish
	// fails fast and the republish on connect carries the new desired state.
	f.apply(exporterManifest("registry.local/exporter:1.1"))
	checkfor.Eventually(t, wait, 50*time.Millisecond, func() error {
		if err := gw.expectRunning("registry.local/exporter:1.1"); err != nil {
			return err
		}
		if err := expectConverged(ctx, f.api, "gw-1"); err != nil {
			return err
		}
		n, err := f.api.GetNode(ctx, "gw-1")
		if err != nil || !n.Online {
			return fmt.Errorf("node not back online after the broker restart (%v)", err)
		}
		return nil
	})
	if st := gw.node.Client().Stats(); st.Reconnects == 0 {
		t.Errorf("agent stats %+v: it never reconnected, so the broker restart was not exercised", st)
	}
}

// expectConverged checks that the exporter daemonset runs its current
// revision, ready, on node and nowhere else, as the controller reports it.
func expectConverged(ctx context.Context, c *api.Client, node string) error {
	ds, err := c.GetDaemonSet(ctx, exporter)
	if err != nil {
		return err
	}
	s := ds.Status
	if s.DesiredNumberScheduled != 1 || s.NumberReady != 1 || s.UpdatedNumberScheduled != 1 || s.NumberAvailable != 1 {
		return fmt.Errorf("daemonset status %+v, want desired, ready, updated and available 1", s)
	}
	if len(ds.Instances) != 1 {
		return fmt.Errorf("instances %+v, want one on %s", ds.Instances, node)
	}
	in := ds.Instances[0]
	if in.Node != node || in.Revision != ds.CurrentHash || in.Phase != schema.PhaseRunning || !in.Ready {
		return fmt.Errorf("instance %+v, want %s running revision %s, ready", in, node, ds.CurrentHash)
	}
	n, err := c.GetNode(ctx, node)
	if err != nil {
		return err
	}
	if n.DesiredGeneration == 0 || n.ObservedGeneration != n.DesiredGeneration {
		return fmt.Errorf("node %s observed generation %d, desired %d", node, n.ObservedGeneration, n.DesiredGeneration)
	}
	return nil
}

// TestNodeCannotReadOrWriteAnotherNode checks invariant 4 through Mosquitto's
// ACL with the controller's real traffic: a client authenticated as node-a
// never receives node-b's desired state, retained or freshly published, and
// a status it forges for node-b never reaches the controller.
func TestNodeCannotReadOrWriteAnotherNode(t *testing.T) {
	f := startFleet(t, []string{"node-a", "node-b"}, mosquitto.Config{})
	a := f.startAgent("node-a", gatewayLabels)
	b := f.startAgent("node-b", gatewayLabels)
	f.apply(exporterManifest("registry.local/exporter:1.0"))
	checkfor.Eventually(t, wait, 50*time.Millisecond, func() error {
		return errors.Join(a.expectRunning("registry.local/exporter:1.0"), b.expectRunning("registry.local/exporter:1.0"))
	})

	ownTopic := schema.NodeTopic("node-a", schema.TopicDesired)
	otherTopic := schema.NodeTopic("node-b", schema.TopicDesired)
	spy := f.startSpy("node-a")
	ctx := context.Background()
	for _, topic := range []string{ownTopic, otherTopic} {
		// Mosquitto 2.0 grants a denied MQTT 3.1.1 subscription and then
		// delivers nothing on it; a broker answering 0x80 is fine too.
		err := spy.client.Subscribe(ctx, mqttclient.Subscription{Filter: topic, QoS: 1})
		if err != nil && !errors.Is(err, mqttclient.ErrSubscriptionRefused) {
			t.Fatalf("subscribe %s: %v", topic, err)
		}
	}
	// Both desired states are retained now; the spy's own arrives, so
	// node-b's would have been delivered with it.
	checkfor.Eventually(t, wait, 20*time.Millisecond, func() error {
		if len(spy.received(ownTopic)) == 0 {
			return errors.New("spy did not receive node-a's retained desired state")
		}
		return nil
	})

	// The controller publishes new desired states to both nodes; once the
	// spy has node-a's, node-b's (published in the same pass) would be there.
	f.apply(exporterManifest("registry.local/exporter:1.1"))
	checkfor.Eventually(t, wait, 20*time.Millisecond, func() error {
		if err := b.expectRunning("registry.local/exporter:1.1"); err != nil {
			return err // node-b did get its own new desired state
		}
		if got := spy.received(ownTopic); len(got) < 2 {
			return fmt.Errorf("spy received %d desired states of node-a, want the update too", len(got))
		}
		return nil
	})
	if got := spy.received(otherTopic); len(got) > 0 {
		t.Errorf("node-a read node-b's desired state: %q", got)
	}

	// Writes: a forged status for node-b, then an event of node-a's own
	// on the same connection; the controller receives in order, so once it
	// recorded the event it would have applied the forged status.
	forged, _ := schema.Encode(schema.NodeStatus{SchemaVersion: schema.WireVersion, Node: "node-b", Labels: map[string]string{"forged": "true"}})
	if err := spy.client.Publish(ctx, schema.NodeTopic("node-b", schema.TopicStatus), forged, true); err != nil {
		t.Fatalf("publish forged status: %v", err)
	}
	marker, _ := schema.Encode(schema.NodeEvent{SchemaVersion: schema.WireVersion, Node: "node-a", Time: time.Now().UTC(), Type: schema.EventNormal, Reason: "InteropMarker"})
	if err := spy.client.Publish(ctx, schema.NodeTopic("node-a", schema.TopicEvents), marker, false); err != nil {
		t.Fatalf("publish marker event: %v", err)
	}
	checkfor.Eventually(t, wait, 50*time.Millisecond, func() error {
		evs, err := f.api.Events(ctx, api.EventFilter{Object: "node/node-a"})
		if err != nil {
			return err
		}
		for _, ev := range evs {
			if ev.Reason == "InteropMarker" {
				return nil
			}
		}
		return errors.New("controller has not recorded node-a's marker event")
	})
	n, err := f.api.GetNode(ctx, "node-b")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := n.Labels["forged"]; ok {
		t.Errorf("node-a overwrote node-b's status: labels %v", n.Labels)
	}
}
