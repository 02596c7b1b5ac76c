package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/edgeset/edgeset/controller/reconcile"
	"github.com/edgeset/edgeset/credential"
	"github.com/edgeset/edgeset/mqttclient"
	"github.com/edgeset/edgeset/schema"
)

// subscriptions are the topics the controller reads: every node's state.
var subscriptions = []string{
	schema.NodeWildcard(schema.TopicStatus),
	schema.NodeWildcard(schema.TopicOnline),
	schema.NodeWildcard(schema.TopicObserved),
	schema.NodeWildcard(schema.TopicEvents),
	schema.NodeWildcard(schema.TopicLogsResponse),
}

// watchBroker makes the embedded broker's listeners part of readiness
// (/readyz fails while one cannot accept connections) and its metrics part
// of /metrics.
func (c *Controller) watchBroker() error {
	c.health.probe("mqtt listener", c.broker.Health)
	if err := c.broker.Register(c.metrics.reg); err != nil {
		return fmt.Errorf("register broker metrics: %w", err)
	}
	return nil
}

// subscribeInline subscribes in-process to the embedded broker, which
// delivers every retained message before returning and never drops; then
// it republishes what devices must see.
func (c *Controller) subscribeInline() error {
	for i, filter := range subscriptions {
		if err := c.broker.Subscribe(filter, i+1, c.handleMessage); err != nil {
			return err
		}
	}
	c.log.Info("embedded broker serving", "mqtt", c.broker.Addr().String())
	close(c.inlineReady)
	c.requestRepublish()
	c.wake()
	return nil
}

// newBrokerClient prepares the client for an external broker.
func (c *Controller) newBrokerClient() (*mqttclient.Client, error) {
	password, err := c.brokerPassword()
	if err != nil {
		return nil, err
	}
	opts := mqttclient.Options{
		BrokerURL:  c.cfg.BrokerURL,
		ClientID:   c.cfg.BrokerUsername,
		Username:   c.cfg.BrokerUsername,
		Password:   password,
		CAFile:     c.cfg.BrokerCAFile,
		Handler:    c.handleMessage,
		NoCoalesce: eventTopic,
		OnConnect: func(context.Context) {
			c.log.Info("connected to broker", "url", c.cfg.BrokerURL)
			c.requestRepublish()
			c.wake()
		},
		OnConnectionLost: func(err error) { c.log.Warn("broker connection lost", "url", c.cfg.BrokerURL, "err", err) },
		Logger:           c.log,
	}
	for _, f := range subscriptions {
		opts.Subscriptions = append(opts.Subscriptions, mqttclient.Subscription{Filter: f, QoS: 1})
	}
	if t := c.cfg.dropTopic(); t != "" {
		opts.Subscriptions = append(opts.Subscriptions, mqttclient.Subscription{Filter: t, QoS: 0})
	}
	return mqttclient.New(opts)
}

// eventTopic reports topics whose messages are events, each of which counts,
// rather than state, of which only the newest does.
func eventTopic(topic string) bool {
	return strings.HasSuffix(topic, "/"+schema.TopicEvents) || strings.HasSuffix(topic, "/"+schema.TopicLogsResponse)
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

// brokerPassword reads broker-password-file, or derives the controller
// token from the fleet secret.
func (c *Controller) brokerPassword() (string, error) {
	if c.cfg.BrokerPasswordFile != "" {
		b, err := os.ReadFile(c.cfg.BrokerPasswordFile)
		if err != nil {
			return "", fmt.Errorf("read broker-password-file: %w", err)
		}
		return strings.TrimSpace(string(b)), nil
	}
	secret, err := credential.LoadOrCreateFleetSecret(c.cfg.DataDir)
	if err != nil {
		return "", err
	}
	return credential.ControllerToken(secret), nil
}

// publish sends one message to the fleet, retained when it is state.
func (c *Controller) publish(ctx context.Context, topic string, payload []byte, retained bool) error {
	var err error
	if c.broker != nil {
		err = c.broker.Publish(topic, payload, retained)
	} else {
		err = c.client.Publish(ctx, topic, payload, retained)
	}
	if err != nil {
		c.metrics.publishErrors.Inc()
		return err
	}
	c.metrics.messagesOut.Inc()
	c.metrics.bytesOut.Add(float64(len(payload)))
	return nil
}

// publishAll sends many messages, pipelined on an external broker.
func (c *Controller) publishAll(ctx context.Context, msgs []mqttclient.Message) error {
	if c.client != nil {
		err := c.client.PublishAll(ctx, msgs)
		if err == nil {
			for _, m := range msgs {
				c.metrics.messagesOut.Inc()
				c.metrics.bytesOut.Add(float64(len(m.Payload)))
			}
		}
		return err
	}
	for _, m := range msgs {
		if err := c.publish(ctx, m.Topic, m.Payload, m.Retained); err != nil {
			return err
		}
	}
	return nil
}

// desiredMessage encodes a node's desired state as published.
func desiredMessage(node string, d reconcile.NodeDesired) mqttclient.Message {
	instances := d.Instances
	if instances == nil {
		instances = []schema.DesiredInstance{}
	}
	payload, _ := json.Marshal(schema.DesiredState{
		SchemaVersion: schema.WireVersion, Node: node, Generation: d.Generation, Instances: instances,
		ConfigMaps: d.ConfigMaps, Secrets: d.Secrets,
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
	start := time.Now()
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
	c.mu.Lock()
	defer c.mu.Unlock()
	msgs := make([]mqttclient.Message, 0, len(c.state.revisions)+len(c.state.current))
	for _, hash := range sortedKeys(c.state.revisions) {
		msgs = append(msgs, revisionMessage(c.state.revisions[hash]))
	}
	msgs = append(msgs, c.publishedConfigMessagesLocked()...)
	for _, node := range sortedKeys(c.state.current) {
		m := desiredMessage(node, c.state.current[node])
		if !deliverable(m) {
			// Reported again (the event folds into its series): the
			// controller may have restarted since the first report.
			c.desiredTooLarge(node, c.state.current[node], m)
			continue
		}
		msgs = append(msgs, m)
	}
	return msgs
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
