package controller

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/edgeset/edgeset/mqttclient"
	"github.com/edgeset/edgeset/schema"
)

// An external broker may drop messages on their way to the controller: one
// that bounds each client's queue (Mosquitto's max_queued_messages) drops
// the overflow of a burst and, over MQTT 3.1.1, tells neither side. A
// dropped retained status is not sent again until the controller subscribes
// again, and the replay of a new subscription goes through the same queue.
// So the controller watches the broker's drop counter and re-reads every
// known node's retained state, a few topics at a time (mqttclient.Refresh),
// when it rises and every broker-resync-interval anyway. The embedded
// broker needs none of this: the controller reads it in-process.

const (
	// refreshBatch is how many topics one step of a re-read asks for: the
	// broker holds at most this many of its messages for the controller.
	refreshBatch = 8
	// resyncMinGap separates two re-reads, so a drop counter that keeps
	// rising during a burst does not keep the broker busy with re-reads.
	resyncMinGap = 10 * time.Second
)

// resyncKinds are the retained node topics the controller reads.
var resyncKinds = []string{schema.TopicStatus, schema.TopicOnline, schema.TopicObserved}

// requestResync asks for a re-read of every node's retained state; it never
// blocks.
func (c *Controller) requestResync() {
	select {
	case c.resync <- struct{}{}:
	default:
	}
}

// resyncLoop re-reads every known node's retained state when asked and
// every BrokerResyncInterval, at most once per resyncMinGap, until ctx
// ends. It runs only with an external broker.
func (c *Controller) resyncLoop(ctx context.Context) error {
	var tick <-chan time.Time
	if c.cfg.BrokerResyncInterval > 0 {
		t := time.NewTicker(c.cfg.BrokerResyncInterval)
		defer t.Stop()
		tick = t.C
	}
	gap := time.NewTimer(0)
	defer gap.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick:
		case <-c.resync:
		}
		if err := c.refreshNodes(ctx); err != nil && ctx.Err() == nil {
			// Offline, the next connection replays everything anyway.
			if !errors.Is(err, mqttclient.ErrNotConnected) {
				c.log.Warn("re-reading the fleet's retained state failed; retrying", "err", err)
				c.requestResync()
			}
		}
		gap.Reset(resyncMinGap)
		select {
		case <-ctx.Done():
			return nil
		case <-gap.C:
		}
	}
}

// refreshNodes has the broker send every known node's retained status,
// presence and observed state again.
func (c *Controller) refreshNodes(ctx context.Context) error {
	states := c.registry.States()
	topics := make([]string, 0, len(resyncKinds)*len(states))
	for _, st := range states {
		for _, kind := range resyncKinds {
			topics = append(topics, schema.NodeTopic(st.Name, kind))
		}
	}
	start := time.Now()
	c.log.Info("re-reading the fleet's retained state from the broker", "nodes", len(states), "topics", len(topics))
	if err := c.client.Refresh(ctx, topics, refreshBatch, schema.FenceTopic); err != nil {
		return err
	}
	c.metrics.resyncs.Inc()
	c.log.Info("re-read the fleet's retained state", "nodes", len(states), "took", time.Since(start).Round(time.Millisecond))
	return nil
}

// onBrokerDropCount handles the external broker's count of dropped
// messages (broker-drop-topic). Any rise may have cost the controller a
// node's latest state or a node its desired state: both are repaired. The
// first count seen, and a count that went down (a restarted broker counts
// from zero), are taken whole. It runs on the Handler goroutine only.
func (c *Controller) onBrokerDropCount(payload []byte) {
	n, err := strconv.ParseUint(strings.TrimSpace(string(payload)), 10, 64)
	if err != nil {
		c.reject("", c.cfg.dropTopic(), fmt.Errorf("drop counter: %w", err))
		return
	}
	prev, seen := c.drops.count, c.drops.seen
	c.drops.count, c.drops.seen = n, true
	rise, since := n, "broker start" // the first count, or a restarted broker's
	switch {
	case n == 0 || (seen && n == prev):
		return
	case seen && n > prev:
		rise, since = n-prev, "last count"
	}
	c.metrics.brokerDrops.Add(float64(rise))
	c.log.Warn("the broker dropped messages; republishing desired states and re-reading the fleet's retained state",
		"dropped", rise, "since", since,
		"hint", "size the broker's per-client queue for the fleet (Mosquitto: max_queued_messages; docs/mosquitto.md)")
	c.requestRepublish()
	c.requestResync()
}
