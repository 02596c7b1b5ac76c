package controller

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"time"

	"github.com/edgeset/edgeset/controller/reconcile"
	"github.com/edgeset/edgeset/controller/rollout"
	"github.com/edgeset/edgeset/controller/store"
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
			next = time.Now().Add(retryAfterError)
		}
		if first {
			close(c.ready)
			first = false
		}
		resetTimer(timer, next)
	}
}

// waitTransport waits until the embedded broker has delivered the retained
// fleet state in-process, so the first pass decides on the whole fleet. With
// an external broker the loop starts at once: publishes made while it is
// unreachable are repeated by the republish on connect.
func (c *Controller) waitTransport(ctx context.Context) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-c.transport.Synced():
		return nil
	}
}

func resetTimer(t *time.Timer, at time.Time) {
	t.Stop()
	select {
	case <-t.C:
	default:
	}
	if at.IsZero() {
		return
	}
	t.Reset(max(time.Until(at), 0))
}

// pass decides over a snapshot and applies the decision: durable first,
// then published. It returns when the next pass is due by the clock alone.
func (c *Controller) pass(ctx context.Context) (time.Time, error) {
	c.passMu.Lock()
	defer c.passMu.Unlock()
	start := time.Now()
	c.mu.Lock()
	snap := c.snapshotLocked(start)
	snap.Observed = maps.Clone(c.state.observed)
	c.mu.Unlock()

	d := decide(snap)
	if err := c.apply(ctx, snap, d); err != nil {
		return time.Time{}, err
	}
	c.metrics.observePass(time.Since(start), len(d.Plan.Desired))
	return d.RequeueAt, nil
}

// apply stores the decision, then publishes it.
func (c *Controller) apply(ctx context.Context, snap snapshot, d decision) error {
	if err := c.applyRollouts(snap, d); err != nil {
		return err
	}
	msgs, err := c.applyDesired(snap.Now, d.Plan)
	if err != nil {
		return err
	}
	c.recordChanges(d.Plan)
	c.setStatus(d)
	if c.clearsDeletedNodes(d.Plan) {
		c.wake() // the next pass forgets them, once their empty state is out
	}
	if len(msgs) > 0 {
		if err := c.publishAll(ctx, msgs); err != nil && !errors.Is(err, mqttclient.ErrNotConnected) {
			c.log.Warn("publish desired state", "messages", len(msgs), "err", err)
		}
	}
	return nil
}

// applyRollouts stores every rollout state that changed, records its
// events, and makes a rolled-back revision the daemonset's current one.
func (c *Controller) applyRollouts(snap snapshot, d decision) error {
	for _, ds := range snap.DaemonSets {
		r, ok := d.Rollouts[ds.Key]
		if !ok {
			continue
		}
		for _, e := range r.Events {
			c.events.add(dsObject(ds.Key), eventType(e.Warning), e.Reason, rolloutMessage(e))
		}
		if reflect.DeepEqual(r.State, ds.Rollout) {
			continue
		}
		if err := c.storeRollout(ds, r.State, snap.Now); err != nil {
			return err
		}
	}
	return nil
}

// storeRollout stores a rollout state; a rollback (the state moved to
// another target) is stored with the daemonset's template, current and
// rejected revision in one transaction by storeRollback.
func (c *Controller) storeRollout(ds dsSnapshot, st rollout.State, now time.Time) error {
	if st.Target != ds.Revision {
		return c.storeRollback(ds.Key, st, now) // rollouts.go
	}
	if err := c.store.PutRollout(ds.Key, st); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.state.daemonsets[ds.Key]; ok { // else deleted meanwhile
		e.rollout = st
	}
	return nil
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

// applyDesired stores every changed desired state (generations assigned by
// the store, monotonic per node across restarts and deletions), updates the
// in-memory copy, and returns the messages to publish: new revisions
// first, then the desired states.
func (c *Controller) applyDesired(now time.Time, plan reconcile.Output) ([]mqttclient.Message, error) {
	if err := c.forget(plan.Forget); err != nil {
		return nil, err
	}
	if len(plan.Desired) == 0 {
		c.mu.Lock()
		defer c.mu.Unlock()
		if !c.state.topics.dirty {
			return nil, nil
		}
		publish, clear := c.configTopicsLocked()
		return append(publish, clear...), nil
	}
	recs := make(map[string]store.DesiredRecord, len(plan.Desired))
	for node, nd := range plan.Desired {
		recs[node] = store.DesiredRecord{Node: node, Instances: nd.Instances,
			ConfigMaps: nd.ConfigMaps, Secrets: nd.Secrets, PublishedAt: now}
	}
	storeStart := time.Now()
	gens, err := c.store.PutDesiredBatch(recs)
	c.metrics.storeWrite.Observe(time.Since(storeStart).Seconds())
	if err != nil {
		return nil, err
	}
	revMsgs, err := c.newRevisions(plan.Desired)
	if err != nil {
		return nil, err
	}
	msgs := revMsgs
	c.mu.Lock()
	defer c.mu.Unlock()
	var desired []mqttclient.Message
	for node, nd := range plan.Desired {
		nd.Generation = gens[node]
		c.state.current[node] = nd
		m := desiredMessage(node, nd)
		if !deliverable(m) {
			c.desiredTooLarge(node, nd, m)
			continue
		}
		desired = append(desired, m)
	}
	// Config objects go before the desired states that reference them;
	// the topics nobody references any more are cleared after them.
	publish, clear := c.configTopicsLocked()
	msgs = append(msgs, publish...)
	msgs = append(msgs, desired...)
	return append(msgs, clear...), nil
}

// newRevisions loads the templates of revisions that desired states now
// reference for the first time, and returns their messages.
func (c *Controller) newRevisions(desired map[string]reconcile.NodeDesired) ([]mqttclient.Message, error) {
	need := map[string]string{} // hash -> daemonset
	c.mu.Lock()
	for _, nd := range desired {
		for _, in := range nd.Instances {
			if _, ok := c.state.revisions[in.Revision]; !ok {
				need[in.Revision] = in.DaemonSet
			}
		}
	}
	c.mu.Unlock()
	var msgs []mqttclient.Message
	for hash, ds := range need {
		rev, err := c.store.GetRevision(ds, hash)
		if err != nil {
			return nil, fmt.Errorf("load revision %s of %s: %w", hash, ds, err)
		}
		wire := rev.Wire()
		c.mu.Lock()
		c.state.revisions[hash] = wire
		c.mu.Unlock()
		msgs = append(msgs, revisionMessage(wire))
	}
	return msgs, nil
}

// clearsDeletedNodes reports whether the plan publishes the empty desired
// state of a node the operator deleted.
func (c *Controller) clearsDeletedNodes(plan reconcile.Output) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for node := range c.state.deletedNodes {
		if _, ok := plan.Desired[node]; ok {
			return true
		}
	}
	return false
}

// forget drops deleted nodes whose empty desired state was published.
func (c *Controller) forget(nodes []string) error {
	for _, node := range nodes {
		if err := c.store.DeleteDesired(node); err != nil {
			return err
		}
		c.mu.Lock()
		delete(c.state.current, node)
		delete(c.state.observed, node)
		delete(c.state.deletedNodes, node)
		c.state.topics.dirty = true
		c.mu.Unlock()
	}
	return nil
}

// summariseAbove is the number of changes of one kind and daemonset past
// which one summary event replaces per-node events.
const summariseAbove = 10

// recordChanges turns the plan's changes into events, one per node for
// small changes and one summary per daemonset for fleet-wide ones.
func (c *Controller) recordChanges(plan reconcile.Output) {
	for _, group := range [][]reconcile.Change{plan.Scheduled, plan.Updated, plan.Unscheduled, plan.Evicted} {
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

// setStatus records every daemonset's status.
func (c *Controller) setStatus(d decision) {
	c.mu.Lock()
	defer c.mu.Unlock()
	status := make(map[string]dsStatus, len(d.Plan.Status))
	for key, st := range d.Plan.Status {
		status[key] = dsStatus{DaemonSetStatus: st, Rollout: d.Rollouts[key].Status}
	}
	c.state.status = status
	online, known := c.registry.Counts()
	c.metrics.setFleet(online, known-online, status, c.state.observed)
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
	c.mu.Lock()
	dirty := c.state.dirtyNodes
	c.state.dirtyNodes = map[string]bool{}
	c.mu.Unlock()
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
		c.mu.Lock()
		for _, rec := range recs {
			c.state.dirtyNodes[rec.Name] = true
		}
		c.mu.Unlock()
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
