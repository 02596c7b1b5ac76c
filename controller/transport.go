package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"slices"
	"strings"
	"time"

	"github.com/edgeset/edgeset/controller/reconcile"
	"github.com/edgeset/edgeset/mqttclient"
	"github.com/edgeset/edgeset/schema"
	"github.com/prometheus/client_golang/prometheus"
)

// subscriptions are the topics the controller reads: every node's state.
var subscriptions = []string{
	schema.NodeWildcard(schema.TopicStatus),
	schema.NodeWildcard(schema.TopicOnline),
	schema.NodeWildcard(schema.TopicObserved),
	schema.NodeWildcard(schema.TopicEvents),
	schema.NodeWildcard(schema.TopicTelemetry),
	schema.NodeWildcard(schema.TopicLogsResponse),
	schema.NodeWildcard(schema.TopicExecResponse),
}

// transport is how the controller reaches the fleet: the embedded broker
// (transport_embedded.go) or a client of an external one
// (transport_external.go). It calls the hooks given at construction for
// every message on the controller's subscriptions and each time they are
// (re)established.
type transport interface {
	// Run serves (embedded) or stays connected (external) until ctx ends.
	Run(ctx context.Context) error
	// Synced is closed once the retained fleet state was delivered
	// (embedded) or at once (external).
	Synced() <-chan struct{}
	// Publish sends one message to the fleet.
	Publish(ctx context.Context, m mqttclient.Message) error
	// PublishAll sends msgs, pipelined where the transport can; it
	// returns an error if any of them was not sent.
	PublishAll(ctx context.Context, msgs []mqttclient.Message) error
	// Addr is the embedded broker's MQTT address; nil for an external one.
	Addr() net.Addr
	// Describe names the transport for Version: "embedded 127.0.0.1:1883"
	// or the broker URL.
	Describe() string
	// Pending is how many received messages wait to be handled.
	Pending() int
	// Close releases what the transport holds; safe to call twice.
	Close() error
}

// wrapper is a transport that changes what another sends (signing,
// sealing) and hands everything else to it.
type wrapper interface {
	unwrap() transport
}

// innermost is t under every wrapper: the embedded broker or the
// external broker's client, for what only they do.
func innermost(t transport) transport {
	for {
		w, ok := t.(wrapper)
		if !ok {
			return t
		}
		t = w.unwrap()
	}
}

// transportHooks are how a transport reaches the controller. None blocks
// on I/O.
type transportHooks struct {
	// message takes one message on the controller's subscriptions.
	message func(topic string, payload []byte)
	// subscribed is called each time the subscriptions are (re)established.
	subscribed func()
	// republish asks for every node's desired state to be published again,
	// after the broker dropped something the republish repairs.
	republish func()
	// reject counts and logs a malformed message of the transport's own.
	reject func(topic string, err error)
	// nodes lists the known nodes, whose retained state a re-read asks for.
	nodes func() []string
	// unreported counts the nodes known online (from the store, at start)
	// whose observed state has not arrived yet.
	unreported func() int
	// unconnected is called once by a transport that knows which nodes
	// are connected (the embedded broker), a while after it started, with
	// a function that lists them (expireUnconnected).
	unconnected func(connected func() map[string]bool)
}

// hooks are the controller's hooks for its transport.
func (c *Controller) hooks() transportHooks {
	return transportHooks{
		message: c.handleMessage,
		subscribed: func() {
			c.requestRepublish()
			c.wake()
		},
		republish:   c.requestRepublish,
		reject:      func(topic string, err error) { c.reject("", topic, err) },
		nodes:       c.knownNodes,
		unreported:  c.unreportedNodes,
		unconnected: c.expireUnconnected,
	}
}

// unreportedNodes counts the registered nodes the registry holds online
// that have not reported what they run since the controller started.
func (c *Controller) unreportedNodes() int {
	n := 0
	for _, st := range c.registry.States() {
		if st.Registered && st.Online {
			if _, ok := c.state.observedOf(st.Name); !ok {
				n++
			}
		}
	}
	return n
}

// knownNodes lists the names of the nodes in the registry.
func (c *Controller) knownNodes() []string {
	states := c.registry.States()
	names := make([]string, len(states))
	for i, st := range states {
		names[i] = st.Name
	}
	return names
}

// openTransport prepares the embedded broker or the external broker's
// client, as the configuration says.
func (c *Controller) openTransport() (transport, error) {
	if c.cfg.newTransport != nil {
		return c.cfg.newTransport(c.hooks())
	}
	if c.cfg.Embedded() {
		t, err := newEmbeddedTransport(c.brokerOptions(), c.cfg.presenceRecheck, &c.health, c.metrics, c.log, c.hooks())
		if err != nil {
			return nil, err // not a nil *embeddedTransport in a non-nil transport
		}
		return t, nil
	}
	password, err := brokerPassword(c.cfg)
	if err != nil {
		return nil, err
	}
	t, err := newExternalTransport(c.cfg, password, c.metrics, c.log, c.hooks())
	if err != nil {
		return nil, err
	}
	return t, nil
}

// publish sends one message to the fleet, retained when it is state.
func (c *Controller) publish(ctx context.Context, topic string, payload []byte, retained bool) error {
	return c.publishAll(ctx, []mqttclient.Message{{Topic: topic, Payload: payload, Retained: retained}})
}

// publishAll sends many messages, pipelined on an external broker,
// counting one publish error if any was not sent (meteredTransport counts
// what was).
func (c *Controller) publishAll(ctx context.Context, msgs []mqttclient.Message) error {
	var err error
	if len(msgs) == 1 {
		err = c.transport.Publish(ctx, msgs[0])
	} else {
		err = c.transport.PublishAll(ctx, msgs)
	}
	if err != nil {
		c.metrics.publishErrors.Inc()
	}
	return err
}

// meteredTransport counts what its transport sent: every message and its
// payload bytes as they went to the broker, so under signing and sealing
// (which wrap it) the bytes are the signed and sealed ones.
type meteredTransport struct {
	transport
	messages, bytes prometheus.Counter
}

func (t *meteredTransport) unwrap() transport { return t.transport }

func (t *meteredTransport) Publish(ctx context.Context, m mqttclient.Message) error {
	if err := t.transport.Publish(ctx, m); err != nil {
		return err
	}
	t.count([]mqttclient.Message{m})
	return nil
}

func (t *meteredTransport) PublishAll(ctx context.Context, msgs []mqttclient.Message) error {
	if err := t.transport.PublishAll(ctx, msgs); err != nil {
		return err
	}
	t.count(msgs)
	return nil
}

func (t *meteredTransport) count(msgs []mqttclient.Message) {
	bytes := 0
	for _, m := range msgs {
		bytes += len(m.Payload)
	}
	t.messages.Add(float64(len(msgs)))
	t.bytes.Add(float64(bytes))
}

// desiredMessage encodes a node's desired state as published.
func desiredMessage(node string, d reconcile.NodeDesired) mqttclient.Message {
	instances := d.Instances
	if instances == nil {
		instances = []schema.DesiredInstance{}
	}
	payload, _ := json.Marshal(schema.DesiredState{
		SchemaVersion: schema.WireVersion, Node: node, Generation: d.Generation, Instances: instances,
		ConfigMaps: d.ConfigMaps, Secrets: d.Secrets, Prefetch: d.Prefetch,
	})
	return mqttclient.Message{Topic: schema.NodeTopic(node, schema.TopicDesired), Payload: payload, Retained: true}
}

// revisionMessage encodes a revision as published on its retained topic.
func revisionMessage(rev schema.Revision) mqttclient.Message {
	payload, _ := json.Marshal(rev)
	return mqttclient.Message{Topic: schema.RevisionTopic(rev.Hash), Payload: payload, Retained: true}
}

// republishLoop republishes every revision in use and every node's desired
// state whenever asked (after each (re)connection to the broker, or when
// the broker dropped a desired state), paced at RepublishRate.
func (c *Controller) republishLoop(ctx context.Context) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-c.republish:
		}
		if err := c.republishAll(ctx); err != nil && ctx.Err() == nil {
			c.log.Warn("republish interrupted; will retry on the next connection", "err", err)
		}
	}
}

func (c *Controller) republishAll(ctx context.Context) error {
	msgs := c.republishMessages()
	start := time.Now() // the republish's duration, for the log (the wall clock)
	batch := max(1, c.cfg.RepublishRate/10)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for len(msgs) > 0 {
		n := min(batch, len(msgs))
		if err := c.publishAll(ctx, msgs[:n]); err != nil {
			return err
		}
		msgs = msgs[n:]
		if len(msgs) == 0 {
			break
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
	c.metrics.republishes.Inc()
	c.log.Debug("republished desired state", "took", time.Since(start))
	return nil
}

// republishMessages lists revisions and config objects first, then
// desired states, so an agent never waits for a template or config object
// it was told to use.
func (c *Controller) republishMessages() []mqttclient.Message {
	// A desired state too large is reported again (the event folds into
	// its series): the controller may have restarted since the first
	// report.
	return c.withKeySet(c.state.republishMessages(c.desiredTooLarge))
}

// republishedTopic reports whether topic is one of the retained topics
// republishAll publishes again after every (re)connection: the key set,
// revisions, ConfigMaps, and each node's desired state and Secrets. The
// embedded broker keeps them in memory only (broker.Options.Republished):
// the store holds what they are made of, and a fleet-wide change would
// otherwise write every node's message to broker.db as well.
func republishedTopic(topic string) bool {
	if topic == schema.KeySetTopic || strings.HasPrefix(topic, schema.RevisionTopic("")) ||
		strings.HasPrefix(topic, schema.ConfigMapTopic("")) {
		return true
	}
	rest, ok := strings.CutPrefix(topic, schema.TopicPrefix+"nodes/")
	if !ok {
		return false
	}
	_, kind, _ := strings.Cut(rest, "/")
	return kind == schema.TopicDesired || strings.HasPrefix(kind, schema.TopicSecretsPrefix)
}

// reasonDesiredTooLarge is the reason of the Warning event on a node whose
// desired state does not fit in one message.
const reasonDesiredTooLarge = "DesiredStateTooLarge"

// deliverable reports whether m, a node's desired state, fits in a message
// the broker delivers and every agent accepts (deliveryLimit, within
// schema.MaxMessageSize). One that does not is never published: its node
// could only refuse it, and keeps the last desired state it could take.
func deliverable(m mqttclient.Message) bool {
	return len(m.Payload) <= min(deliveryLimit, schema.MaxMessageSize)
}

// desiredTooLarge reports that node's new desired state nd, encoded as m,
// is not published because it does not fit: a Warning event on the node
// naming the size, the limit and what makes it up, and a metric.
func (c *Controller) desiredTooLarge(node string, nd reconcile.NodeDesired, m mqttclient.Message) {
	c.metrics.desiredTooLarge.Inc()
	c.events.add(nodeObject(node), schema.EventWarning, reasonDesiredTooLarge,
		fmt.Sprintf("desired state generation %d (%d instances, %d ConfigMaps, %d Secrets) is %d bytes, over the limit of %d bytes "+
			"one message may have (max packet size %d); not sent: the node keeps its previous desired state. "+
			"Make fewer daemonsets match the node, or shorten their names",
			nd.Generation, len(nd.Instances), len(nd.ConfigMaps), len(nd.Secrets), len(m.Payload),
			min(deliveryLimit, schema.MaxMessageSize), maxPacketSize))
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
