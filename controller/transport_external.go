package controller

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/edgeset/edgeset/credential"
	"github.com/edgeset/edgeset/mqttclient"
	"github.com/edgeset/edgeset/schema"
)

// externalTransport is a client of an external MQTT 3.1.1 broker
// (broker-url). The client reconnects on its own; each connection tells the
// controller to republish what devices must see; what the broker drops is
// repaired as resync.go describes.
type externalTransport struct {
	client         *mqttclient.Client
	urls           []string      // broker-url: the broker's nodes
	dropTopic      string        // the broker's drop counter topic; "" when off
	resyncInterval time.Duration // the periodic re-read; 0 or less for none
	qos            byte          // of the node subscriptions (subscribeQoS)
	settle         time.Duration // the re-read after each connection; 0 or less for none
	log            *slog.Logger
	metrics        *metrics
	hooks          transportHooks
	synced         chan struct{} // closed once the first connection's replay was handled
	syncedOnce     sync.Once
	handling       atomic.Int32  // messages in Handler now
	resync         chan struct{} // asks for a re-read of retained node state

	// drops is the broker's last drop count, read and written only by the
	// Handler goroutine.
	drops struct {
		count uint64
		seen  bool
	}
}

var _ transport = (*externalTransport)(nil)

// newExternalTransport prepares the client for cfg's external broker,
// logging in with password. Nothing connects until Run.
func newExternalTransport(cfg Config, password string, m *metrics, log *slog.Logger, hooks transportHooks) (*externalTransport, error) {
	t := &externalTransport{
		urls: cfg.brokerURLs(), dropTopic: cfg.dropTopic(), resyncInterval: cfg.BrokerResyncInterval, settle: cfg.BrokerSettleInterval,
		qos: subscribeQoS(cfg),
		log: log, metrics: m, hooks: hooks,
		synced: make(chan struct{}), resync: make(chan struct{}, 1),
	}
	opts := mqttclient.Options{
		BrokerURLs: t.urls,
		ClientID:   cmp.Or(cfg.BrokerClientID, cfg.BrokerUsername),
		Username:   cfg.BrokerUsername,
		Password:   password,
		CAFile:     cfg.BrokerCAFile,
		Handler:    t.handle,
		NoCoalesce: eventTopic,
		OnConnect: func(ctx context.Context) {
			log.Info("connected to broker", "url", t.client.Broker())
			hooks.subscribed()
			t.syncOnce(ctx)
			t.rereadAfterConnect(ctx)
		},
		Stale: staleState,
		// err names the broker node.
		OnConnectionLost: func(err error) { log.Warn("broker connection lost", "err", err) },
		Logger:           log,
	}
	for _, f := range subscriptions {
		opts.Subscriptions = append(opts.Subscriptions, mqttclient.Subscription{Filter: f, QoS: t.qos})
	}
	if t.dropTopic != "" {
		opts.Subscriptions = append(opts.Subscriptions, mqttclient.Subscription{Filter: t.dropTopic, QoS: 0})
	}
	var err error
	if t.client, err = mqttclient.New(opts); err != nil {
		return nil, err
	}
	return t, nil
}

// Bounds of one attempt of syncOnce's fence.
const (
	fenceFirstWait = 2 * time.Second
	fenceMaxWait   = 30 * time.Second
)

// syncOnce closes synced once the first connection's retained replay has
// been handled: the fence came back through the broker, and the inbox is
// empty. Until then the reconcile loop waits, as it waits for the
// embedded broker's in-process replay: a pass made before the fleet's
// reports are in would take every device for one that never reported,
// and a rollout moves such nodes without spending its budget (a restarted
// controller updated six of ten nodes at once with maxUnavailable 2
// before this). Later connections change nothing: the controller keeps
// what it knows.
func (t *externalTransport) syncOnce(ctx context.Context) {
	select {
	case <-t.synced:
		return
	default:
	}
	// A marker can be lost (mochi as an external broker loses the first
	// one after a connection now and then): try again on this connection,
	// each attempt waiting twice as long, rather than not syncing until
	// the next one.
	for wait := fenceFirstWait; ; wait = min(2*wait, fenceMaxWait) {
		fctx, cancel := context.WithTimeout(ctx, wait)
		err := t.client.Fence(fctx, schema.FenceTopic)
		cancel()
		if err == nil {
			break
		}
		if ctx.Err() != nil || errors.Is(err, mqttclient.ErrNotConnected) {
			return // the next connection tries again
		}
		t.log.Warn("waiting for the broker's replay of the fleet's state", "err", err, "waited", wait)
	}
	// Idle at two ticks in a row: a message between the inbox and
	// Handler is in neither count for a moment.
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for idle := 0; idle < 2; {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if t.client.Stats().Pending > 0 || t.handling.Load() > 0 {
			idle = 0
		} else {
			idle++
		}
	}
	t.awaitReports(ctx)
	t.syncedOnce.Do(func() { close(t.synced) })
}

// awaitReports waits, at most settle, until every node known online has
// reported: a cluster's member may not have every retained message yet
// (one just restarted rebuilds them from its stream), and a node missing
// from the replay would look to the first pass like one that never
// reported. A fresh controller knows no node and waits for nothing.
func (t *externalTransport) awaitReports(ctx context.Context) {
	if t.settle <= 0 || t.hooks.unreported == nil {
		return
	}
	deadline := time.NewTimer(t.settle)
	defer deadline.Stop()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		n := t.hooks.unreported()
		if n == 0 {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-deadline.C:
			t.log.Warn("deciding without the reports of some nodes known online; the re-read after the connection settled asks for them again", "nodes", n)
			return
		case <-tick.C:
		}
	}
}

// rereadAfterConnect subscribes to the node topics again settle after a
// connection, which has the broker send their retained messages again
// (MQTT 3.1.1 3.8.4: a SUBSCRIBE of an existing filter replaces it, and
// retained messages are re-sent), unless the connection ended first. A
// broker cluster spreads the controller's subscription, and a device's
// retained state, over its nodes asynchronously: a device that announced
// itself on one node just before the controller subscribed on another
// gets to the controller neither live nor in the replay of its
// subscription, and would stay unknown, since a device announces a
// change only once. The second replay, once the cluster settled, picks it
// up; a controller that knew everything changes nothing.
func (t *externalTransport) rereadAfterConnect(ctx context.Context) {
	if t.settle <= 0 {
		return
	}
	select {
	case <-ctx.Done():
		return
	case <-time.After(t.settle):
	}
	for _, kind := range resyncKinds { // the retained ones
		f := schema.NodeWildcard(kind)
		if err := t.client.Subscribe(ctx, mqttclient.Subscription{Filter: f, QoS: t.qos}); err != nil {
			if ctx.Err() == nil {
				t.log.Warn("re-subscribing after the connection settled", "filter", f, "err", err)
			}
			return
		}
	}
	t.log.Info("re-read the fleet's retained state after the connection settled", "after", t.settle)
}

// eventTopic reports topics whose messages are events, each of which counts,
// rather than state, of which only the newest does.
func eventTopic(topic string) bool {
	return strings.HasSuffix(topic, "/"+schema.TopicEvents) || strings.HasSuffix(topic, "/"+schema.TopicLogsResponse) ||
		strings.HasSuffix(topic, "/"+schema.TopicExecResponse)
}

// staleState reports whether incoming is an older state than pending for
// the same topic (a redelivered or reordered message): a lower observed
// generation; for presence, a will of another session arriving after an
// online (the late will of the connection it replaced), or an online of a
// session after its will. Session numbers are the device's clock and are
// never compared (see registry.ApplyPresence). The coalescing inbox of
// the broker client then keeps pending.
func staleState(topic string, pending, incoming []byte) bool {
	_, kind, ok := schema.ParseNodeTopic(topic)
	if !ok {
		return false
	}
	var p, q struct {
		ObservedGeneration *uint64 `json:"observedGeneration"`
		Online             bool    `json:"online"`
		Session            *int64  `json:"session"`
	}
	if json.Unmarshal(pending, &p) != nil || json.Unmarshal(incoming, &q) != nil {
		return false
	}
	switch kind {
	case schema.TopicObserved:
		return p.ObservedGeneration != nil && q.ObservedGeneration != nil && *q.ObservedGeneration < *p.ObservedGeneration
	case schema.TopicOnline:
		if p.Session == nil || q.Session == nil {
			return false
		}
		same := *p.Session == *q.Session
		return p.Online && !q.Online && !same || !p.Online && q.Online && same
	}
	return false
}

// subscribeQoS is the QoS of the controller's node subscriptions: 0 on a
// NATS cluster (nats-auth-url set), 1 otherwise. nats-server serves a QoS
// 1 subscription through a JetStream consumer and redelivers a message
// whose acknowledgement it did not get within its AckWait (30 s): at
// 1,000 nodes a node's Pending report reached the controller 28.6 s after
// the node was ready on its only connection, and, being of the same
// generation, it held the node as updating for good. Every node topic but
// events is retained and re-read after each connection
// (broker-settle-interval), and events are best effort anyway.
func subscribeQoS(cfg Config) byte {
	if len(cfg.NATSAuthURLs) > 0 {
		return 0
	}
	return 1
}

// brokerPassword reads cfg's broker-password-file, or derives the
// controller token from the fleet secret in cfg's data directory.
func brokerPassword(cfg Config) (string, error) {
	if cfg.BrokerPasswordFile != "" {
		b, err := os.ReadFile(cfg.BrokerPasswordFile)
		if err != nil {
			return "", fmt.Errorf("read broker-password-file: %w", err)
		}
		return strings.TrimSpace(string(b)), nil
	}
	secret, err := credential.LoadOrCreateFleetSecret(cfg.DataDir)
	if err != nil {
		return "", err
	}
	return credential.ControllerToken(secret), nil
}

// Run stays connected, reconnecting after every loss, and re-reads the
// fleet's retained state when asked, until ctx ends.
func (t *externalTransport) Run(ctx context.Context) error {
	g, ctx := errgroup.WithContext(ctx)
	g.Go(func() error { return t.client.Run(ctx) })
	g.Go(func() error { return t.resyncLoop(ctx) })
	return g.Wait()
}

// Synced is closed from the start: the controller's loop need not wait for
// the broker, as publishes made while it is unreachable are repeated by the
// republish on connect.
func (t *externalTransport) Synced() <-chan struct{} { return t.synced }

// Publish publishes m at QoS 1 and waits for the broker's acknowledgement.
func (t *externalTransport) Publish(ctx context.Context, m mqttclient.Message) error {
	return t.client.Publish(ctx, m.Topic, m.Payload, m.Retained)
}

// PublishAll publishes msgs pipelined (mqttclient.Client.PublishAll).
func (t *externalTransport) PublishAll(ctx context.Context, msgs []mqttclient.Message) error {
	return t.client.PublishAll(ctx, msgs)
}

// Addr is nil: the controller listens for no MQTT connection.
func (t *externalTransport) Addr() net.Addr { return nil }

// Describe is the broker's URL; of several, the one connected to (if any)
// and the list.
func (t *externalTransport) Describe() string {
	list := strings.Join(t.urls, ",")
	if len(t.urls) == 1 {
		return list
	}
	if live := t.client.Broker(); live != "" {
		return live + " (of " + list + ")"
	}
	return list
}

// Pending is the number of messages in the client's coalescing inbox.
func (t *externalTransport) Pending() int { return t.client.Stats().Pending }

// Close does nothing: Run disconnects when its ctx ends.
func (t *externalTransport) Close() error { return nil }

// handle takes one message from the broker: the drop counter, or one for
// the controller.
func (t *externalTransport) handle(topic string, payload []byte) {
	t.handling.Add(1)
	defer t.handling.Add(-1)
	if t.dropTopic == "" || topic != t.dropTopic {
		t.hooks.message(topic, payload)
		return
	}
	t.metrics.messagesIn.Inc() // counted as every message from the fleet is
	t.onDropCount(payload)
}
