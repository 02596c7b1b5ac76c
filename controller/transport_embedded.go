package controller

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/edgeset/edgeset/broker"
	"github.com/edgeset/edgeset/mqttclient"
	"github.com/edgeset/edgeset/schema"
)

// embeddedTransport is the controller's own broker: devices connect to it,
// and the controller subscribes and publishes in-process, where nothing is
// ever dropped on the controller's side.
type embeddedTransport struct {
	broker  *broker.Broker
	addr    string // the configured MQTT address, as Describe shows it
	log     *slog.Logger
	metrics *metrics
	hooks   transportHooks
	synced  chan struct{} // closed once the in-process subscriptions delivered the retained state
	// recheck is how long after subscribing the transport has the
	// controller end the online sessions no connection holds.
	recheck time.Duration
}

var _ transport = (*embeddedTransport)(nil)

// newEmbeddedTransport creates the broker with opts (its OnDrop is the
// transport's own), makes its listeners part of readiness (/readyz fails
// while one cannot accept connections) and its metrics part of /metrics.
// The broker serves nothing until Run.
func newEmbeddedTransport(opts broker.Options, recheck time.Duration, h *health, m *metrics, log *slog.Logger, hooks transportHooks) (*embeddedTransport, error) {
	t := &embeddedTransport{addr: opts.Addr, log: log, metrics: m, hooks: hooks, synced: make(chan struct{}), recheck: recheck}
	opts.OnDrop = t.onDrop
	b, err := broker.New(opts)
	if err != nil {
		return nil, err
	}
	if err := b.Register(m.reg); err != nil {
		_ = b.Close()
		return nil, fmt.Errorf("register broker metrics: %w", err)
	}
	h.probe("mqtt listener", b.Health)
	t.broker = b
	return t, nil
}

// Run serves MQTT until ctx ends and, once the broker serves, subscribes
// in-process; recheck later, it has the controller end the online sessions
// that no connection holds.
//
// A broker that stopped without closing its connections (the process
// killed, the machine lost) published no will for them, and the retained
// presence of a node that never connects again reads online for ever.
// Only this broker can tell: it is the one every node connects to, and it
// knows its connections. By recheck (a keepalive and a half by default,
// when a broker gives up on a silent connection and publishes its will)
// every agent that is up has had time to reconnect.
func (t *embeddedTransport) Run(ctx context.Context) error {
	g, ctx := errgroup.WithContext(ctx)
	g.Go(func() error { return t.broker.Run(ctx) })
	g.Go(func() error {
		select {
		case <-ctx.Done():
			return nil
		case <-t.broker.Ready():
		}
		if err := t.subscribe(); err != nil {
			return err
		}
		timer := time.NewTimer(t.recheck)
		defer timer.Stop()
		select {
		case <-ctx.Done():
		case <-timer.C:
			t.hooks.unconnected(t.broker.ConnectedIdentities)
		}
		return nil
	})
	return g.Wait()
}

// subscribe subscribes in-process to the broker, which delivers every
// retained message before returning and never drops; then it marks the
// transport synced and tells the controller it is subscribed.
func (t *embeddedTransport) subscribe() error {
	for i, filter := range subscriptions {
		if err := t.broker.Subscribe(filter, i+1, t.hooks.message); err != nil {
			return err
		}
	}
	t.log.Info("embedded broker serving", "mqtt", t.broker.Addr().String())
	close(t.synced)
	t.hooks.subscribed()
	return nil
}

// Synced is closed once the in-process subscriptions delivered the
// retained fleet state.
func (t *embeddedTransport) Synced() <-chan struct{} { return t.synced }

// Publish publishes m in-process.
func (t *embeddedTransport) Publish(_ context.Context, m mqttclient.Message) error {
	return t.broker.Publish(m.Topic, m.Payload, m.Retained)
}

// PublishAll publishes msgs in order, stopping at the first failure.
func (t *embeddedTransport) PublishAll(ctx context.Context, msgs []mqttclient.Message) error {
	for _, m := range msgs {
		if err := t.Publish(ctx, m); err != nil {
			return err
		}
	}
	return nil
}

// Addr is the broker's TCP address.
func (t *embeddedTransport) Addr() net.Addr { return t.broker.Addr() }

// Describe is "embedded" and the configured MQTT address.
func (t *embeddedTransport) Describe() string { return "embedded " + t.addr }

// Pending is 0: in-process messages are handled as they are published.
func (t *embeddedTransport) Pending() int { return 0 }

// Close stops the broker; safe to call twice.
func (t *embeddedTransport) Close() error { return t.broker.Close() }

// onDrop is told by the broker that a message was not delivered. A drop
// towards a node is repaired by republishing; the controller's own
// in-process subscription never drops.
func (t *embeddedTransport) onDrop(clientID, topic string) {
	t.metrics.brokerDrops.Inc()
	if repairedByRepublish(topic) {
		t.hooks.republish()
	}
}

// repairedByRepublish reports whether a message dropped on its way to a
// node is one the republish sends again: a desired state, a ConfigMap or
// one of the node's Secrets.
func repairedByRepublish(topic string) bool {
	if _, kind, ok := schema.ParseNodeTopic(topic); ok && kind == schema.TopicDesired {
		return true
	}
	if strings.HasPrefix(topic, schema.ConfigMapTopic("")) {
		return true
	}
	rest, ok := strings.CutPrefix(topic, schema.TopicPrefix+"nodes/")
	if !ok {
		return false
	}
	_, kind, _ := strings.Cut(rest, "/")
	return strings.HasPrefix(kind, schema.TopicSecretsPrefix)
}
