package edgeagent_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	mochi "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/hooks/auth"
	"github.com/mochi-mqtt/server/v2/listeners"
	"github.com/stretchr/testify/require"

	"github.com/edgeset/edgeset/edgeagent"
	"github.com/edgeset/edgeset/edgeagent/fake"
	"github.com/edgeset/edgeset/internal/checkfor"
	"github.com/edgeset/edgeset/internal/mochistop"
	"github.com/edgeset/edgeset/mqttclient"
	"github.com/edgeset/edgeset/schema"
)

// brokerNode is one in-process broker node that allows everyone; stop
// kills it (once; cleanup then does nothing).
type brokerNode struct {
	srv  *mochi.Server
	url  string
	stop func()
}

func startBrokerNode(t *testing.T) brokerNode {
	t.Helper()
	srv := mochi.New(&mochi.Options{InlineClient: true, Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, srv.AddHook(new(auth.AllowHook), nil))
	ln := listeners.NewTCP(listeners.Config{ID: "tcp", Address: "127.0.0.1:0"})
	require.NoError(t, srv.AddListener(ln))
	require.NoError(t, srv.Serve())
	var once sync.Once
	stop := func() { once.Do(func() { _ = mochistop.Close(srv, "tcp") }) }
	t.Cleanup(stop)
	return brokerNode{srv: srv, url: "tcp://" + ln.Address(), stop: stop}
}

// presence returns the retained presence of node on b, if any.
func (b brokerNode) presence(node string) (schema.Presence, error) {
	msgs := b.srv.Topics.Messages(schema.NodeTopic(node, schema.TopicOnline))
	if len(msgs) != 1 {
		return schema.Presence{}, fmt.Errorf("%s: %d retained presence messages", b.url, len(msgs))
	}
	var p schema.Presence
	if err := json.Unmarshal(msgs[0].Payload, &p); err != nil {
		return schema.Presence{}, fmt.Errorf("%s: presence %q: %w", b.url, msgs[0].Payload, err)
	}
	return p, nil
}

// waitPresence waits until node's presence on b reads online and, when
// notSession is non-zero, belongs to another session.
func (b brokerNode) waitPresence(t *testing.T, node string, online bool, notSession int64) schema.Presence {
	t.Helper()
	var p schema.Presence
	checkfor.Eventually(t, 10*time.Second, 10*time.Millisecond, func() error {
		var err error
		if p, err = b.presence(node); err != nil {
			return err
		}
		if p.Online != online || (notSession != 0 && p.Session == notSession) {
			return fmt.Errorf("%s: presence %+v, want online=%v of a session other than %d", b.url, p, online, notSession)
		}
		return nil
	})
	return p
}

// TestPresenceAcrossBrokerNodeDeath: a broker node that dies publishes no
// will, so presence is not read from there. The node reconnects to the
// surviving node and announces itself online there, with a new session
// whose will the survivor now holds: a later loss there reads offline.
func TestPresenceAcrossBrokerNodeDeath(t *testing.T) {
	a, b := startBrokerNode(t), startBrokerNode(t)
	node, err := edgeagent.NewNode(edgeagent.NodeOptions{
		Agent: edgeagent.Config{NodeName: testNode, Ephemeral: true},
		MQTT: mqttclient.Options{BrokerURLs: []string{a.url, b.url}, OrderedBrokers: true, FirstConnectJitter: -1,
			Backoff: mqttclient.Backoff{Initial: 20 * time.Millisecond, Max: 200 * time.Millisecond}},
	}, fake.New())
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- node.Run(ctx) }()
	t.Cleanup(func() { cancel(); require.NoError(t, <-done) })

	onA := a.waitPresence(t, testNode, true, 0)
	require.Equal(t, a.url, node.Client().Broker())

	a.stop()
	onB := b.waitPresence(t, testNode, true, onA.Session)
	require.Equal(t, b.url, node.Client().Broker())

	// The survivor holds the will of the new session: killing the node's
	// connection there publishes it offline with that session, and the
	// node comes back online on B (A is still dead).
	seen := watchPresence(t, b.url, testNode)
	cl, ok := b.srv.Clients.Get(testNode)
	require.True(t, ok, "B does not know the node")
	cl.Stop(errors.New("test: connection killed"))
	checkfor.Eventually(t, 10*time.Second, 10*time.Millisecond, func() error {
		got := seen()
		for i, p := range got {
			if !p.Online && p.Session == onB.Session {
				for _, q := range got[i+1:] {
					if q.Online && q.Session != onB.Session {
						return nil
					}
				}
			}
		}
		return fmt.Errorf("presence on B %+v, want the will of session %d, then online again", got, onB.Session)
	})
}

// watchPresence records every presence message of node on the broker at
// url, in order, from a client of its own; it returns them.
func watchPresence(t *testing.T, url, node string) func() []schema.Presence {
	t.Helper()
	topic := schema.NodeTopic(node, schema.TopicOnline)
	var mu sync.Mutex
	var got []schema.Presence // guarded by mu
	c, err := mqttclient.New(mqttclient.Options{BrokerURL: url, ClientID: "watcher", FirstConnectJitter: -1,
		Subscriptions: []mqttclient.Subscription{{Filter: topic, QoS: 1}},
		NoCoalesce:    func(string) bool { return true },
		Handler: func(_ string, payload []byte) {
			var p schema.Presence
			if json.Unmarshal(payload, &p) == nil {
				mu.Lock()
				got = append(got, p)
				mu.Unlock()
			}
		}})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	t.Cleanup(func() { cancel(); require.NoError(t, <-done) })
	checkfor.Eventually(t, 10*time.Second, 10*time.Millisecond, func() error {
		mu.Lock()
		defer mu.Unlock()
		if len(got) == 0 {
			return errors.New("watcher has not received the retained presence yet")
		}
		return nil
	})
	return func() []schema.Presence {
		mu.Lock()
		defer mu.Unlock()
		return append([]schema.Presence(nil), got...)
	}
}

// TestPresenceAnnouncedAgainOnceSettled: a late will of the connection the
// node replaced (here published by hand, of an older session, as a broker
// cluster's member does when it learns of the takeover late) overwrites
// the node's retained online message; SettleInterval after connecting, the
// node announces the session it holds online again, so the retained
// presence a restarted controller reads is right.
func TestPresenceAnnouncedAgainOnceSettled(t *testing.T) {
	b := startBrokerNode(t)
	node, err := edgeagent.NewNode(edgeagent.NodeOptions{
		Agent: edgeagent.Config{NodeName: testNode, Ephemeral: true, Logger: slog.New(slog.DiscardHandler)},
		MQTT: mqttclient.Options{BrokerURLs: []string{b.url}, FirstConnectJitter: -1,
			Backoff: mqttclient.Backoff{Initial: 20 * time.Millisecond, Max: 200 * time.Millisecond}},
		SettleInterval: 2 * time.Second,
	}, fake.New())
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- node.Run(ctx) }()
	t.Cleanup(func() { cancel(); require.NoError(t, <-done) })

	online := b.waitPresence(t, testNode, true, 0)
	late := schema.Presence{SchemaVersion: schema.WireVersion, Node: testNode, Online: false, Session: online.Session - 1}
	payload, err := schema.Encode(late)
	require.NoError(t, err)
	require.NoError(t, b.srv.Publish(schema.NodeTopic(testNode, schema.TopicOnline), payload, true, 1))
	require.False(t, b.waitPresence(t, testNode, false, 0).Online)

	again := b.waitPresence(t, testNode, true, 0)
	require.Equal(t, online.Session, again.Session, "the same connection announced again")
}

// TestReportAgainOnceSettled: an older observed report delivered after the
// node's own (a cluster member held it, storing it, while the node
// reconnected elsewhere; here published by hand) is replaced by the
// node's second announcement, SettleInterval after it connected.
func TestReportAgainOnceSettled(t *testing.T) {
	b := startBrokerNode(t)
	node, err := edgeagent.NewNode(edgeagent.NodeOptions{
		Agent: edgeagent.Config{NodeName: testNode, Ephemeral: true, Logger: slog.New(slog.DiscardHandler)},
		MQTT: mqttclient.Options{BrokerURLs: []string{b.url}, FirstConnectJitter: -1,
			Backoff: mqttclient.Backoff{Initial: 20 * time.Millisecond, Max: 200 * time.Millisecond}},
		SettleInterval: 2 * time.Second,
	}, fake.New())
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- node.Run(ctx) }()
	t.Cleanup(func() { cancel(); require.NoError(t, <-done) })

	b.waitPresence(t, testNode, true, 0)
	topic := schema.NodeTopic(testNode, schema.TopicObserved)
	var own []byte
	checkfor.Eventually(t, 10*time.Second, 10*time.Millisecond, func() error {
		msgs := b.srv.Topics.Messages(topic)
		if len(msgs) != 1 {
			return fmt.Errorf("%d retained reports", len(msgs))
		}
		own = msgs[0].Payload
		return nil
	})
	older, err := schema.Encode(schema.ObservedState{SchemaVersion: schema.WireVersion, Node: testNode,
		Instances: []schema.InstanceStatus{{DaemonSet: "monitoring/exporter", Revision: "0123456789abcdef0123", Phase: schema.PhasePending}}})
	require.NoError(t, err)
	require.NoError(t, b.srv.Publish(topic, older, true, 1))
	checkfor.Eventually(t, 10*time.Second, 10*time.Millisecond, func() error {
		msgs := b.srv.Topics.Messages(topic)
		if len(msgs) != 1 || string(msgs[0].Payload) != string(own) {
			return fmt.Errorf("retained report %q, want the node's own %q again", msgs[0].Payload, own)
		}
		return nil
	})
}

// TestPresenceAnnouncedAgainForRepublishedDesiredState: when the
// controller republishes the desired state the node runs (it does on each
// of its connections, after a restart too), the node announces its
// presence again: a retained offline left by a broker cluster (a late will
// of another session, published here by hand) is replaced while the node
// keeps its connection, whatever the age of that connection.
func TestPresenceAnnouncedAgainForRepublishedDesiredState(t *testing.T) {
	b := startBrokerNode(t)
	node, err := edgeagent.NewNode(edgeagent.NodeOptions{
		Agent: edgeagent.Config{NodeName: testNode, Ephemeral: true, Logger: slog.New(slog.DiscardHandler)},
		MQTT: mqttclient.Options{BrokerURLs: []string{b.url}, FirstConnectJitter: -1,
			Backoff: mqttclient.Backoff{Initial: 20 * time.Millisecond, Max: 200 * time.Millisecond}},
		SettleInterval: -1,
	}, fake.New())
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- node.Run(ctx) }()
	t.Cleanup(func() { cancel(); require.NoError(t, <-done) })

	online := b.waitPresence(t, testNode, true, 0)
	desired, err := schema.Encode(schema.DesiredState{SchemaVersion: schema.WireVersion, Node: testNode, Generation: 1})
	require.NoError(t, err)
	desiredTopic := schema.NodeTopic(testNode, schema.TopicDesired)
	require.NoError(t, b.srv.Publish(desiredTopic, desired, true, 1))
	checkfor.Eventually(t, 10*time.Second, 10*time.Millisecond, func() error {
		if obs, ok := node.Agent().Observed(); !ok || obs.ObservedGeneration != 1 {
			return errors.New("desired state not applied yet")
		}
		return nil
	})

	late, err := schema.Encode(schema.Presence{SchemaVersion: schema.WireVersion, Node: testNode, Online: false, Session: online.Session - 1})
	require.NoError(t, err)
	require.NoError(t, b.srv.Publish(schema.NodeTopic(testNode, schema.TopicOnline), late, true, 1))
	require.False(t, b.waitPresence(t, testNode, false, 0).Online)

	require.NoError(t, b.srv.Publish(desiredTopic, desired, true, 1))
	again := b.waitPresence(t, testNode, true, 0)
	require.Equal(t, online.Session, again.Session, "the same connection announced again")
	require.Equal(t, uint64(1), node.Client().Stats().Connects)
}
