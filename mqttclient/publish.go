package mqttclient

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	mqtt "github.com/eclipse/paho.mqtt.golang"
)

// subscribeBatch is the most filters sent in one SUBSCRIBE packet.
const subscribeBatch = 64

// refusedQoS is the SUBACK return code for a refused filter.
const refusedQoS = 0x80

// Publish sends one message at QoS 1 and waits for the broker's PUBACK, for
// at most WriteTimeout or until ctx ends (at QoS 0 with
// Options.PublishAtMostOnce: until it is written). Offline it returns ErrNotConnected
// at once and queues nothing: edgeset's callers are level-triggered and
// republish their whole state from OnConnect after the next connection.
func (c *Client) Publish(ctx context.Context, topic string, payload []byte, retained bool) error {
	pc := c.current()
	if pc == nil {
		return fmt.Errorf("publish %s: %w", topic, ErrNotConnected)
	}
	tok := pc.Publish(topic, c.publishQoS(), retained, payload)
	if err := c.countPublish(await(ctx, tok, c.deadline())); err != nil {
		return fmt.Errorf("publish %s: %w", topic, err)
	}
	return nil
}

// PublishAll publishes msgs at QoS 1 (QoS 0 with PublishAtMostOnce) keeping
// up to PublishWindow of them unacknowledged (unwritten) at once, so a fan-out of 10,000 desired states costs a few
// round trips, not 10,000. Messages go out in order. It returns the joined
// errors of the failed messages, each naming its topic; once the connection
// is gone it stops issuing and the error wraps ErrNotConnected.
func (c *Client) PublishAll(ctx context.Context, msgs []Message) error {
	if len(msgs) == 0 {
		return nil
	}
	pc := c.current()
	if pc == nil {
		return fmt.Errorf("publish %d messages: %w", len(msgs), ErrNotConnected)
	}
	w := &window{c: c, ctx: ctx}
	for i, m := range msgs {
		if len(w.pending) == c.opts.PublishWindow {
			w.waitOldest()
		}
		if w.stop() {
			w.errs = append(w.errs, fmt.Errorf("%d messages not published: %w", len(msgs)-i, w.cause()))
			break
		}
		w.pending = append(w.pending, pendingPublish{topic: m.Topic, tok: pc.Publish(m.Topic, c.publishQoS(), m.Retained, m.Payload)})
	}
	for len(w.pending) > 0 {
		w.waitOldest()
	}
	return errors.Join(w.errs...)
}

// publishQoS is the QoS of every publish (not of the will).
func (c *Client) publishQoS() byte {
	if c.opts.PublishAtMostOnce {
		return 0
	}
	return 1
}

// pendingPublish is an issued, unacknowledged publish.
type pendingPublish struct {
	topic string
	tok   mqtt.Token
}

// window tracks PublishAll's in-flight publishes and their failures.
type window struct {
	c            *Client
	ctx          context.Context
	pending      []pendingPublish // oldest first
	errs         []error
	notConnected bool
}

// waitOldest waits for the oldest pending publish and records its outcome.
func (w *window) waitOldest() {
	p := w.pending[0]
	w.pending = w.pending[1:]
	err := w.c.countPublish(await(w.ctx, p.tok, w.c.deadline()))
	if err == nil {
		return
	}
	if errors.Is(err, ErrNotConnected) {
		w.notConnected = true
	}
	w.errs = append(w.errs, fmt.Errorf("publish %s: %w", p.topic, err))
}

// stop reports whether issuing more publishes is pointless.
func (w *window) stop() bool {
	return w.notConnected || w.ctx.Err() != nil
}

// cause is why the window stopped.
func (w *window) cause() error {
	if w.notConnected {
		return ErrNotConnected
	}
	return w.ctx.Err()
}

// countPublish updates the publish counters for a publish that ended with
// err, and returns err.
func (c *Client) countPublish(err error) error {
	switch {
	case err == nil:
		c.stats.published.Add(1)
	default:
		c.stats.publishErrors.Add(1)
	}
	return err
}

// Subscribe adds sub to the subscriptions made on every connection and, if
// connected, subscribes now and waits for the SUBACK. Offline it returns
// nil: the subscription is made on the next connection, before OnConnect.
// A filter the broker refuses is forgotten and ErrSubscriptionRefused is
// returned.
func (c *Client) Subscribe(ctx context.Context, sub Subscription) error {
	if err := sub.validate(); err != nil {
		return fmt.Errorf("subscribe: %w", err)
	}
	if c.opts.Handler == nil {
		return fmt.Errorf("subscribe %s: Options.Handler is nil", sub.Filter)
	}
	c.mu.Lock()
	c.subs[sub.Filter] = sub.QoS
	pc := c.conn
	c.mu.Unlock()
	if pc == nil {
		return nil
	}
	err := c.subscribe(ctx, pc, map[string]byte{sub.Filter: sub.QoS})
	switch {
	case errors.Is(err, ErrNotConnected):
		return nil // made on the next connection
	case errors.Is(err, ErrSubscriptionRefused):
		c.mu.Lock()
		delete(c.subs, sub.Filter)
		c.mu.Unlock()
	}
	return err
}

// Unsubscribe removes filter from the subscriptions and, if connected,
// unsubscribes now and waits for the UNSUBACK. Messages already waiting for
// Handler are still delivered.
func (c *Client) Unsubscribe(ctx context.Context, filter string) error {
	c.mu.Lock()
	delete(c.subs, filter)
	pc := c.conn
	c.mu.Unlock()
	if pc == nil {
		return nil
	}
	err := await(ctx, pc.Unsubscribe(filter), c.deadline())
	if err != nil && !errors.Is(err, ErrNotConnected) {
		return fmt.Errorf("unsubscribe %s: %w", filter, err)
	}
	return nil
}

// resubscribe subscribes every remembered filter on a new connection, in
// batches of subscribeBatch filters per SUBSCRIBE.
func (c *Client) resubscribe(ctx context.Context, pc mqtt.Client) error {
	c.mu.Lock()
	subs := maps.Clone(c.subs)
	c.mu.Unlock()
	filters := slices.Sorted(maps.Keys(subs))
	var errs []error
	for batch := range slices.Chunk(filters, subscribeBatch) {
		req := make(map[string]byte, len(batch))
		for _, f := range batch {
			req[f] = subs[f]
		}
		if err := c.subscribe(ctx, pc, req); err != nil {
			if !errors.Is(err, ErrSubscriptionRefused) {
				return err
			}
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// subscribe sends one SUBSCRIBE for filters and checks every return code.
func (c *Client) subscribe(ctx context.Context, pc mqtt.Client, filters map[string]byte) error {
	tok := pc.SubscribeMultiple(filters, nil)
	if err := await(ctx, tok, c.deadline()); err != nil {
		return fmt.Errorf("subscribe %v: %w", slices.Sorted(maps.Keys(filters)), err)
	}
	st, ok := tok.(*mqtt.SubscribeToken)
	if !ok {
		return nil
	}
	var errs []error
	for filter, code := range st.Result() {
		if code == refusedQoS {
			errs = append(errs, fmt.Errorf("subscribe %s: %w", filter, ErrSubscriptionRefused))
		}
	}
	return errors.Join(errs...)
}

// deadline returns the latest time to wait for an acknowledgement.
func (c *Client) deadline() time.Time {
	return time.Now().Add(c.opts.WriteTimeout)
}

// await waits for tok until ctx ends or deadline passes, mapping paho's
// not-connected error to ErrNotConnected.
func await(ctx context.Context, tok mqtt.Token, deadline time.Time) error {
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	select {
	case <-tok.Done():
	case <-ctx.Done():
		return ctx.Err()
	case <-timer.C:
		return ErrTimeout
	}
	err := tok.Error()
	switch {
	case errors.Is(err, mqtt.ErrNotConnected):
		return ErrNotConnected
	case err != nil && strings.HasPrefix(err.Error(), "connection lost before"):
		// paho completes pending tokens with this plain error on loss.
		return fmt.Errorf("%w: %v", ErrNotConnected, err)
	}
	return err
}
