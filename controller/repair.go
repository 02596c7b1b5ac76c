package controller

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"time"

	"github.com/edgeset/edgeset/mqttclient"
)

// A desired state can be lost on its way to an online device without
// either side being told: a broker cluster delivers a QoS 0 subscription
// (what devices use on NATS) at most once, and a subscription that has not
// reached every member yet misses a live message whose retained copy the
// member stored after the subscription's replay; a slow consumer's
// messages are dropped. The device then runs the generation before for as
// long as its connection lasts, and a rollout waits on it. So the
// controller watches for online nodes whose observed generation stays
// below their desired one, and publishes their desired state again: the
// same retained message, which the agent takes if it lacked it and
// answers with its observed state if it had it (a node still pulling an
// image reports its generation only once its pass ends, so republishes
// back off). It is a repair of last resort: level-triggered, bounded per
// round, and silent when every node keeps up.

// DefaultDesiredRepairAfter is how long an online node may lag its desired
// generation before the controller publishes its desired state again
// (desired-repair-after).
const DefaultDesiredRepairAfter = 30 * time.Second

const (
	// repairBackoff bounds the wait between two republishes to one node
	// that keeps lagging, as a multiple of desired-repair-after.
	repairBackoff = 16
	// repairBatch is the most desired states one round republishes; the
	// nodes lagging longest go first, the rest wait for the next round.
	repairBatch = 1000
)

// lagTracker decides which lagging nodes are due for a republish. It is
// owned by the repair loop; the caller gives it the lagging nodes of each
// round.
type lagTracker struct {
	after time.Duration // a node lagging this long is due; also the first wait
	lags  map[string]lag
}

// lag is one node's lag behind its desired state.
type lag struct {
	generation uint64        // the desired generation it lags behind
	since      time.Time     // when the lag at this generation was first seen
	next       time.Time     // when it is due (again)
	wait       time.Duration // the wait after the next republish
}

func newLagTracker(after time.Duration) *lagTracker {
	return &lagTracker{after: after, lags: map[string]lag{}}
}

// due records the nodes lagging at now (node: its desired generation) and
// returns at most limit of them that are due, longest lagging first (then
// by name). A node that caught up, went offline or got a new generation
// starts over; each republish doubles the node's wait, up to
// repairBackoff times after.
func (t *lagTracker) due(now time.Time, lagging map[string]uint64, limit int) []string {
	for node := range t.lags {
		if _, ok := lagging[node]; !ok {
			delete(t.lags, node)
		}
	}
	var out []string
	for node, gen := range lagging {
		l, ok := t.lags[node]
		if !ok || l.generation != gen {
			l = lag{generation: gen, since: now, next: now.Add(t.after), wait: t.after}
			t.lags[node] = l
		}
		if !now.Before(l.next) {
			out = append(out, node)
		}
	}
	slices.SortFunc(out, func(a, b string) int {
		if c := t.lags[a].since.Compare(t.lags[b].since); c != 0 {
			return c
		}
		return cmp.Compare(a, b)
	})
	if len(out) > limit {
		out = out[:limit]
	}
	for _, node := range out {
		l := t.lags[node]
		l.wait = min(2*l.wait, repairBackoff*t.after)
		l.next = now.Add(l.wait)
		t.lags[node] = l
	}
	return out
}

// repairLoop republishes the desired state of online nodes that lag
// behind it (see lagTracker), every desired-repair-after, until ctx ends.
func (c *Controller) repairLoop(ctx context.Context) error {
	after := c.cfg.DesiredRepairAfter
	if after <= 0 {
		return nil
	}
	select {
	case <-ctx.Done():
		return nil
	case <-c.ready: // the first pass has published what the fleet should run
	}
	lags := newLagTracker(after)
	tick := time.NewTicker(max(after/4, 10*time.Millisecond))
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		online, _ := c.registry.Presence()
		nodes := lags.due(c.now(), c.state.lagging(online), repairBatch)
		msgs := c.state.desiredMessages(nodes)
		if len(msgs) == 0 {
			continue
		}
		c.log.Info("republishing the desired state of online nodes that did not take it", "nodes", len(msgs), "after", after)
		c.metrics.desiredRepairs.Add(float64(len(msgs)))
		if err := c.publishAll(ctx, msgs); err != nil && ctx.Err() == nil && !errors.Is(err, mqttclient.ErrNotConnected) {
			c.log.Warn("republish lagging desired states", "nodes", len(msgs), "err", err)
		}
	}
}
