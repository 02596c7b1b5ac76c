package controller

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/edgeset/edgeset/controller/decider"
	"github.com/edgeset/edgeset/controller/reconcile"
	"github.com/edgeset/edgeset/controller/rollout"
	"github.com/edgeset/edgeset/controller/store"
	"github.com/edgeset/edgeset/internal/fanout"
	"github.com/edgeset/edgeset/mqttclient"
	"github.com/edgeset/edgeset/schema"
)

// retryAfterError is how soon a pass that failed (store error) is retried.
const retryAfterError = time.Second

// reconcileLoop makes a pass whenever woken and whenever the clock alone
// would change a decision (an offline grace or a toleration running out, an
// instance becoming available). Wake-ups that arrive during a pass coalesce
// into one more pass.
func (c *Controller) reconcileLoop(ctx context.Context) error {
	if err := c.waitTransport(ctx); err != nil {
		return nil
	}
	timer := time.NewTimer(0)
	defer timer.Stop()
	first := true
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-c.kick:
		case <-timer.C:
		}
		next, err := c.pass(ctx)
		if err != nil {
			c.log.Error("reconcile pass failed; retrying", "err", err)
			next = c.now().Add(retryAfterError)
		}
		if first {
			close(c.ready)
			first = false
		}
		resetTimer(timer, next, c.now())
	}
}

// waitTransport waits until the transport has delivered the retained fleet
// state (the embedded broker in-process; an external broker on the first
// connection: externalTransport.syncOnce), so the first pass decides on
// the whole fleet's reports. With an external broker that is unreachable,
// no pass runs until it is: nothing could be published anyway.
func (c *Controller) waitTransport(ctx context.Context) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-c.transport.Synced():
		return nil
	}
}

// resetTimer makes t fire at at, as read on the controller's clock at now;
// a zero at stops it.
func resetTimer(t *time.Timer, at, now time.Time) {
	t.Stop()
	select {
	case <-t.C:
	default:
	}
	if at.IsZero() {
		return
	}
	t.Reset(max(at.Sub(now), 0))
}

// pass feeds the decider what changed since the last pass, decides, and
// applies the decision: durable first, then published. It returns when
// the next pass is due by the clock alone. A pass whose decision could not
// be stored leaves the decider to be rebuilt from the working state, which
// the failed write did not change.
func (c *Controller) pass(ctx context.Context) (time.Time, error) {
	c.passMu.Lock()
	defer c.passMu.Unlock()
	start := time.Now() // the pass's duration, for metrics (the wall clock)
	now := c.now()
	w := c.state.takeWork()
	if now.Sub(c.lastFull) >= c.cfg.FullPassInterval {
		w.all = true
	}
	if w.all || c.decider == nil {
		c.lastFull = now
	}
	c.feed(w, now)
	d := c.decider.Decide(now)
	if err := c.apply(ctx, now, d); err != nil {
		c.decider = nil
		return time.Time{}, err
	}
	c.lastPass = now
	c.metrics.observePass(time.Since(start), len(d.Desired), d.Placed, d.Full)
	next := d.RequeueAt
	if full := c.lastFull.Add(c.cfg.FullPassInterval); next.IsZero() || full.Before(next) {
		next = full
	}
	return next, nil
}

// apply stores the decision in one transaction (rollout states, desired
// states, forgotten nodes), records it in the working state, then
// publishes it.
func (c *Controller) apply(ctx context.Context, now time.Time, d decider.Decision) error {
	gens, rollbacks, err := c.storeDecision(now, d)
	if err != nil {
		return err
	}
	for _, rec := range rollbacks {
		if err := c.remember(rec); err != nil {
			return err
		}
	}
	c.recordRollouts(d)
	msgs, err := c.commitDecision(d, gens)
	if err != nil {
		return err
	}
	c.recordChanges(d)
	c.setStatus()
	if len(d.Forget) == 0 && c.state.deletedAmong(d.Desired) {
		c.wake() // the next pass forgets them, once their empty state is out
	}
	if len(msgs) > 0 {
		if err := c.publishAll(ctx, msgs); err != nil && !errors.Is(err, mqttclient.ErrNotConnected) {
			c.log.Warn("publish desired state", "messages", len(msgs), "err", err)
		}
	}
	return nil
}

// storeDecision writes one decision in one store transaction: every
// rollout state that changed (its head and the entries of the nodes its
// step changed; the whole state when the step cannot say which, or when
// the stored record is a whole state of before; a rollback whole, with
// the daemonset's template, current and rejected revision), every changed
// desired state (generations
// assigned by the store, monotonic per node across restarts and
// deletions), and the removal of forgotten nodes. passMu is held, so no
// API change to a daemonset or rollout interleaves. It returns the
// generations and the daemonset records a rollback changed.
func (c *Controller) storeDecision(now time.Time, d decider.Decision) (map[string]uint64, []store.DaemonSetRecord, error) {
	recs := make(map[string]store.DesiredRecord, len(d.Desired))
	for node, nd := range d.Desired {
		recs[node] = store.DesiredRecord{Node: node, Instances: nd.Instances,
			ConfigMaps: nd.ConfigMaps, Secrets: nd.Secrets, Prefetch: nd.Prefetch, PublishedAt: now}
	}
	var changed []string
	for key, r := range d.Rollouts {
		if r.StateChanged {
			changed = append(changed, key)
		}
	}
	revisions := c.state.currentRevisions(changed)
	whole := c.state.wholeRollouts(changed)
	var gens map[string]uint64
	var rollbacks []store.DaemonSetRecord
	storeStart := time.Now() // the write's duration, for metrics
	err := c.store.Update(false, func(tx *store.Txn) error {
		gens, rollbacks = nil, nil
		for _, key := range sortedKeys(revisions) {
			r := d.Rollouts[key]
			st := r.State
			if st.Target == revisions[key] {
				if err := putRolloutTxn(tx, key, st, r.Changed, r.AllChanged || whole[key]); err != nil {
					return err
				}
				continue
			}
			rec, err := rollbackTxn(tx, key, st, now) // rollouts.go
			if err != nil {
				return err
			}
			rollbacks = append(rollbacks, rec)
		}
		for _, node := range d.Forget {
			if err := tx.DeleteDesired(node); err != nil {
				return err
			}
		}
		var err error
		gens, err = tx.PutDesiredBatch(recs)
		return err
	})
	if len(d.Desired) > 0 {
		c.metrics.storeWrite.Observe(time.Since(storeStart).Seconds())
	}
	return gens, rollbacks, err
}

// recordRollouts records every stepped rollout's events and keeps each
// changed state in the daemonset's entry.
func (c *Controller) recordRollouts(d decider.Decision) {
	changed := map[string]rollout.State{}
	for _, key := range sortedKeys(d.Rollouts) {
		r := d.Rollouts[key]
		for _, e := range r.Events {
			c.events.add(dsObject(key), eventType(e.Warning), e.Reason, rolloutMessage(e))
		}
		if r.StateChanged {
			changed[key] = r.State
		}
	}
	c.state.commitRollouts(changed)
}

func eventType(warning bool) string {
	if warning {
		return schema.EventWarning
	}
	return schema.EventNormal
}

func rolloutMessage(e rollout.Event) string {
	if e.Node != "" {
		return "node " + e.Node + ": " + e.Message
	}
	return e.Message
}

// commitDecision records a stored decision in the working state (desired
// states with their generations, forgotten nodes) and in the decider, and
// returns the messages to publish: new revisions first, then config
// objects, the desired states, and the config topics to clear.
func (c *Controller) commitDecision(d decider.Decision, gens map[string]uint64) ([]mqttclient.Message, error) {
	revMsgs, err := c.newRevisions(d.Desired)
	if err != nil {
		return nil, err
	}
	nodes := sortedKeys(d.Desired)
	committed := make(map[string]reconcile.NodeDesired, len(d.Desired))
	for _, node := range nodes {
		nd := d.Desired[node]
		nd.Generation = gens[node]
		committed[node] = nd
	}
	encoded := make([]mqttclient.Message, len(nodes))
	fanout.Each(len(nodes), encodeChunk, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			encoded[i] = desiredMessage(nodes[i], committed[nodes[i]])
		}
	})
	desired := encoded[:0]
	for i, m := range encoded {
		if !deliverable(m) {
			c.desiredTooLarge(nodes[i], committed[nodes[i]], m)
			continue
		}
		desired = append(desired, m)
	}
	// Config objects go before the desired states that reference them;
	// the topics nobody references any more are cleared after them.
	publish, clear, changed := c.state.commitDecision(d.Forget, committed, c.decider)
	if !changed {
		return nil, nil
	}
	msgs := append(revMsgs, publish...)
	msgs = append(msgs, desired...)
	return append(msgs, clear...), nil
}

// encodeChunk is the fewest desired states one goroutine of a decision
// encodes; a decision over fewer than two chunks encodes on one.
const encodeChunk = 256

// newRevisions loads the templates of revisions that desired states now
// reference for the first time, and returns their messages.
func (c *Controller) newRevisions(desired map[string]reconcile.NodeDesired) ([]mqttclient.Message, error) {
	need := c.state.missingRevisions(desired) // hash -> daemonset
	var msgs []mqttclient.Message
	for _, hash := range sortedKeys(need) {
		rev, err := c.store.GetRevision(need[hash], hash)
		if err != nil {
			return nil, fmt.Errorf("load revision %s of %s: %w", hash, need[hash], err)
		}
		wire := rev.Wire()
		c.state.addRevision(hash, wire)
		msgs = append(msgs, revisionMessage(wire))
	}
	return msgs, nil
}

// summariseAbove is the number of changes of one kind and daemonset past
// which one summary event replaces per-node events.
const summariseAbove = 10

// recordChanges turns the decision's changes into events, one per node for
// small changes and one summary per daemonset for fleet-wide ones.
func (c *Controller) recordChanges(d decider.Decision) {
	for _, group := range [][]reconcile.Change{d.Scheduled, d.Updated, d.Unscheduled, d.Evicted} {
		byDS := map[string][]reconcile.Change{}
		for _, ch := range group {
			byDS[ch.DaemonSet] = append(byDS[ch.DaemonSet], ch)
		}
		for ds, changes := range byDS {
			c.recordDaemonSetChanges(ds, changes)
		}
	}
}

func (c *Controller) recordDaemonSetChanges(ds string, changes []reconcile.Change) {
	typ := schema.EventNormal
	if changes[0].Reason != reconcile.ReasonScheduled && changes[0].Reason != reconcile.ReasonUpdated {
		typ = schema.EventWarning
	}
	if len(changes) > summariseAbove {
		c.events.add(dsObject(ds), typ, changes[0].Reason,
			fmt.Sprintf("%d nodes (first: %s, %s, %s)", len(changes), changes[0].Node, changes[1].Node, changes[2].Node))
		return
	}
	for _, ch := range changes {
		msg := "node " + ch.Node
		if ch.Message != "" {
			msg += ": " + ch.Message
		}
		if ch.Reason == reconcile.ReasonScheduled {
			msg += ": revision " + ch.Revision
		}
		c.events.add(dsObject(ds), typ, ch.Reason, msg)
	}
}

// setStatus records every daemonset's status as of the last decision.
func (c *Controller) setStatus() {
	decided := c.decider.Status()
	status := make(map[string]dsStatus, len(decided))
	for key, st := range decided {
		status[key] = dsStatus{DaemonSetStatus: st.DaemonSetStatus, Rollout: st.Rollout}
	}
	c.state.setStatus(status)
}

// flushNodesLoop stores the announcements and presence of nodes that
// changed, once a second, so a restarted controller knows its fleet.
func (c *Controller) flushNodesLoop(ctx context.Context) error {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			c.flushNodes()
			return nil
		case <-tick.C:
			c.flushNodes()
			c.retryStoreFault()
		}
	}
}

// flushNodes stores the records of the dirty nodes. When the write fails
// they stay dirty, for the next flush: nothing is lost until the node
// changes again. It holds passMu, as DeleteNode does, so that a record
// read before a node's deletion is never written after it (the node would
// come back at the next start).
func (c *Controller) flushNodes() {
	c.passMu.Lock()
	defer c.passMu.Unlock()
	dirty := c.state.takeDirtyNodes()
	recs := make([]store.NodeRecord, 0, len(dirty))
	for node := range dirty {
		if rec, ok := c.nodeRecord(node); ok {
			recs = append(recs, rec)
		}
	}
	if len(recs) == 0 {
		return
	}
	if err := c.store.PutNodes(recs); err != nil {
		c.log.Error("store node records; kept for the next flush", "count", len(recs), "err", err)
		names := make([]string, len(recs))
		for i, rec := range recs {
			names[i] = rec.Name
		}
		c.state.redirtyNodes(names)
	}
}

func (c *Controller) nodeRecord(node string) (store.NodeRecord, bool) {
	in, ok := c.registry.Input(node)
	if !ok || in.Status == nil {
		return store.NodeRecord{}, false
	}
	st, _ := c.registry.State(node)
	return store.NodeRecord{
		Name: node, Status: *in.Status, Online: st.Online, Session: st.Session,
		LastSeen: st.LastSeen, OfflineSince: st.OfflineSince,
	}, true
}
