package controller

import (
	"container/heap"
	"context"
	"errors"
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
	// nodes longest overdue go first, the rest wait for the next round.
	repairBatch = 1000
)

// lagTracker decides which lagging nodes are due for a republish. It is
// owned by the repair loop, which tells it each change of a node's lag
// (lagging, caughtUp); it keeps the lags in a queue by when they are due,
// so a round costs the changes and the nodes due, not the fleet.
type lagTracker struct {
	after time.Duration // a node lagging this long is due; also the first wait
	lags  map[string]*lag
	queue lagQueue
}

// lag is one node's lag behind its desired state.
type lag struct {
	node       string
	generation uint64        // the desired generation it lags behind
	since      time.Time     // when the lag at this generation was first seen
	next       time.Time     // when it is due (again)
	wait       time.Duration // the wait after the next republish
	index      int           // in the queue
}

func newLagTracker(after time.Duration) *lagTracker {
	return &lagTracker{after: after, lags: map[string]*lag{}}
}

// tell records the lags of changed (node: the desired generation it lags
// behind, 0 for none) at now: a node that lags and is online lags, any
// other caught up.
func (t *lagTracker) tell(changed map[string]uint64, online func(node string) bool, now time.Time) {
	for node, gen := range changed {
		if gen > 0 && online(node) {
			t.lagging(node, gen, now)
		} else {
			t.caughtUp(node)
		}
	}
}

// lagging records that node, online, lags behind desired generation gen at
// now. A node seen lagging for the first time, or behind a new
// generation, starts over: it is due after the tracker's wait.
func (t *lagTracker) lagging(node string, gen uint64, now time.Time) {
	if l, ok := t.lags[node]; ok {
		if l.generation == gen {
			return
		}
		t.caughtUp(node)
	}
	l := &lag{node: node, generation: gen, since: now, next: now.Add(t.after), wait: t.after}
	t.lags[node] = l
	heap.Push(&t.queue, l)
}

// caughtUp forgets node's lag: it caught up, went offline or has no
// desired state any more.
func (t *lagTracker) caughtUp(node string) {
	if l, ok := t.lags[node]; ok {
		heap.Remove(&t.queue, l.index)
		delete(t.lags, node)
	}
}

// due returns at most limit of the nodes due at now, the longest overdue
// first (then the longest lagging, then by name), and schedules each one's
// next republish: each doubles the node's wait, up to repairBackoff times
// after.
func (t *lagTracker) due(now time.Time, limit int) []string {
	var out []string
	for len(out) < limit && len(t.queue) > 0 && !now.Before(t.queue[0].next) {
		l := t.queue[0]
		out = append(out, l.node)
		l.wait = min(2*l.wait, repairBackoff*t.after)
		l.next = now.Add(l.wait)
		heap.Fix(&t.queue, 0)
	}
	return out
}

// lagQueue is a heap of lags, the soonest due first.
type lagQueue []*lag

func (q lagQueue) Len() int { return len(q) }

func (q lagQueue) Less(i, j int) bool {
	a, b := q[i], q[j]
	if c := a.next.Compare(b.next); c != 0 {
		return c < 0
	}
	if c := a.since.Compare(b.since); c != 0 {
		return c < 0
	}
	return a.node < b.node
}

func (q lagQueue) Swap(i, j int) {
	q[i], q[j] = q[j], q[i]
	q[i].index = i
	q[j].index = j
}

func (q *lagQueue) Push(x any) {
	l := x.(*lag)
	l.index = len(*q)
	*q = append(*q, l)
}

func (q *lagQueue) Pop() any {
	old := *q
	l := old[len(old)-1]
	old[len(old)-1] = nil
	*q = old[:len(old)-1]
	return l
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
	lags.tell(c.state.trackLags(), c.online, c.now())
	defer c.state.untrackLags()
	tick := time.NewTicker(max(after/4, 10*time.Millisecond))
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		c.repairRound(ctx, lags, after)
		c.repairRounds.Add(1)
	}
}

// repairRound takes the lags that changed since the last round and
// republishes the desired state of the nodes due.
func (c *Controller) repairRound(ctx context.Context, lags *lagTracker, after time.Duration) {
	now := c.now()
	lags.tell(c.state.takeLags(), c.online, now)
	c.metrics.desiredLagging.Set(float64(len(lags.lags)))
	nodes := lags.due(now, repairBatch)
	msgs := c.state.desiredMessages(nodes)
	if len(msgs) == 0 {
		return
	}
	c.log.Info("republishing the desired state of online nodes that did not take it", "nodes", len(msgs), "after", after)
	c.metrics.desiredRepairs.Add(float64(len(msgs)))
	if err := c.publishAll(ctx, msgs); err != nil && ctx.Err() == nil && !errors.Is(err, mqttclient.ErrNotConnected) {
		c.log.Warn("republish lagging desired states", "nodes", len(msgs), "err", err)
	}
}

// online reports whether the registry knows node online.
func (c *Controller) online(node string) bool {
	st, ok := c.registry.State(node)
	return ok && st.Online
}
