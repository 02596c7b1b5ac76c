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
// So the external transport watches the broker's drop counter and re-reads
// every known node's retained state, a few topics at a time
// (mqttclient.Refresh), when it rises and every broker-resync-interval
// anyway. The embedded broker needs none of this: the controller reads it
// in-process.

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

// onDropCount handles the broker's count of dropped messages
// (broker-drop-topic). Any rise may have cost the controller a node's
// latest state or a node its desired state: both are repaired. The first
// count seen, and a count that went down (a restarted broker counts from
// zero), are taken whole. It runs on the Handler goroutine only.
func (t *externalTransport) onDropCount(payload []byte) {
	n, err := strconv.ParseUint(strings.TrimSpace(string(payload)), 10, 64)
	if err != nil {
		t.hooks.reject(t.dropTopic, fmt.Errorf("drop counter: %w", err))
		return
	}
	prev, seen := t.drops.count, t.drops.seen
	t.drops.count, t.drops.seen = n, true
	rise, since := n, "broker start" // the first count, or a restarted broker's
	switch {
	case n == 0 || (seen && n == prev):
		return
	case seen && n > prev:
		rise, since = n-prev, "last count"
	}
	t.metrics.brokerDrops.Add(float64(rise))
	t.log.Warn("the broker dropped messages; republishing desired states and re-reading the fleet's retained state",
		"dropped", rise, "since", since,
		"hint", "size the broker's per-client queue for the fleet (Mosquitto: max_queued_messages; docs/mosquitto.md)")
	t.hooks.republish()
	t.requestResync()
}

// requestResync asks for a re-read of every node's retained state; it never
// blocks.
func (t *externalTransport) requestResync() {
	select {
	case t.resync <- struct{}{}:
	default:
	}
}

// resyncLoop re-reads every known node's retained state when asked and
// every resyncInterval, at most once per resyncMinGap, until ctx ends.
func (t *externalTransport) resyncLoop(ctx context.Context) error {
	var tick <-chan time.Time
	if t.resyncInterval > 0 {
		tk := time.NewTicker(t.resyncInterval)
		defer tk.Stop()
		tick = tk.C
	}
	gap := time.NewTimer(0)
	defer gap.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick:
		case <-t.resync:
		}
		if err := t.refreshNodes(ctx); err != nil && ctx.Err() == nil {
			// Offline, the next connection replays everything anyway.
			if !errors.Is(err, mqttclient.ErrNotConnected) {
				t.log.Warn("re-reading the fleet's retained state failed; retrying", "err", err)
				t.requestResync()
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
func (t *externalTransport) refreshNodes(ctx context.Context) error {
	nodes := t.hooks.nodes()
	topics := make([]string, 0, len(resyncKinds)*len(nodes))
	for _, node := range nodes {
		for _, kind := range resyncKinds {
			topics = append(topics, schema.NodeTopic(node, kind))
		}
	}
	start := time.Now() // the re-read's duration, for the log (the wall clock)
	t.log.Info("re-reading the fleet's retained state from the broker", "nodes", len(nodes), "topics", len(topics))
	if err := t.client.Refresh(ctx, topics, refreshBatch, schema.FenceTopic); err != nil {
		return err
	}
	t.metrics.resyncs.Inc()
	t.log.Info("re-read the fleet's retained state", "nodes", len(nodes), "took", time.Since(start).Round(time.Millisecond))
	return nil
}
