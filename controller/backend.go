package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/edgeset/edgeset/controller/api"
	"github.com/edgeset/edgeset/controller/placement"
	"github.com/edgeset/edgeset/controller/reconcile"
	"github.com/edgeset/edgeset/controller/rollout"
	"github.com/edgeset/edgeset/controller/store"
	"github.com/edgeset/edgeset/mqttclient"
	"github.com/edgeset/edgeset/schema"
)

// ChangeCauseAnnotation records why a revision was made, as in Kubernetes.
const ChangeCauseAnnotation = "kubernetes.io/change-cause"

var _ api.Backend = (*Controller)(nil)

// placementErrors unpacks placement.Compile's joined field errors.
func placementErrors(err error) []*placement.FieldError {
	var out []*placement.FieldError
	var walk func(error)
	walk = func(err error) {
		var fe *placement.FieldError
		if errors.As(err, &fe) && fe == err {
			out = append(out, fe)
			return
		}
		if j, ok := err.(interface{ Unwrap() []error }); ok {
			for _, e := range j.Unwrap() {
				walk(e)
			}
			return
		}
		if u := errors.Unwrap(err); u != nil {
			walk(u)
			return
		}
		out = append(out, &placement.FieldError{Detail: err.Error()})
	}
	walk(err)
	return out
}

func warningsFor(ws []schema.Warning, src schema.Source) []string {
	var out []string
	for _, w := range ws {
		if w.File == src.File && w.Line >= src.Line {
			out = append(out, w.String())
		}
	}
	return out
}

// placedNodes counts the nodes placement starts ds on at now; zero when ds
// does not compile (ApplyManifests rejected it already).
func placedNodes(ds *schema.DaemonSet, nodes []schema.Node, now time.Time) int {
	p, err := placement.Compile(ds)
	if err != nil {
		return 0
	}
	n := 0
	for i := range nodes {
		if p.Decide(&nodes[i], now).ShouldRun {
			n++
		}
	}
	return n
}

// pruneRevisionsTxn keeps revisionHistoryLimit old revisions of a
// daemonset, never pruning the current one, one a node is still asked to
// run, or the rollout's stable revision (what a rollback returns to). It
// runs in the transaction that stored the daemonset, with passMu held.
func (c *Controller) pruneRevisionsTxn(tx *store.Txn, rec store.DaemonSetRecord) error {
	limit := schema.DefaultRevisionHistoryLimit
	if l := rec.DaemonSet.Spec.RevisionHistoryLimit; l != nil {
		limit = int(*l)
	}
	key := rec.Key()
	inUse := c.state.revisionsInUse(key, rec.CurrentRevision)
	pruned, err := tx.PruneRevisions(key, limit, inUse)
	if err == nil && len(pruned) > 0 {
		c.log.Debug("pruned revisions", "daemonset", key, "revisions", pruned)
	}
	return err
}

// remember puts a stored daemonset into the working state.
func (c *Controller) remember(rec store.DaemonSetRecord) error {
	// A daemonset whose rollout the working state holds keeps it (putEntry):
	// loading it again from the store costs what the fleet's size does.
	load := newEntry
	if c.state.hasRollout(rec.Key()) {
		load = compileEntry
	}
	e, err := load(c.store, rec, c.cfg.NodeOfflineGrace)
	if err != nil {
		return err
	}
	c.state.putEntry(e)
	return nil
}

// ListDaemonSets returns every daemonset with its status, sorted.
func (c *Controller) ListDaemonSets(ctx context.Context) ([]api.DaemonSet, error) {
	views := c.state.views()
	out := make([]api.DaemonSet, 0, len(views))
	for _, v := range views {
		if v.entry.orphan() {
			continue
		}
		out = append(out, daemonSetView(v))
	}
	return out, nil
}

// daemonSetView is the API form of a daemonset and its status.
func daemonSetView(v dsView) api.DaemonSet {
	e, st := &v.entry, v.status
	ds := e.rec.DaemonSet
	ro := st.Rollout
	return api.DaemonSet{
		Namespace: ds.Metadata.Namespace, Name: ds.Metadata.Name,
		Generation: e.rec.Generation, CurrentRevision: e.revision, CurrentHash: e.rec.CurrentRevision,
		CreatedAt: e.rec.CreatedAt, UpdatedAt: e.rec.UpdatedAt, Manifest: ds, Source: e.rec.Source,
		Status: api.DaemonSetStatus{
			ObservedGeneration:     e.rec.Generation,
			DesiredNumberScheduled: st.DesiredNumberScheduled,
			CurrentNumberScheduled: st.CurrentNumberScheduled,
			NumberMisscheduled:     st.NumberMisscheduled,
			NumberReady:            st.NumberReady,
			NumberAvailable:        st.NumberAvailable,
			NumberUnavailable:      st.NumberUnavailable,
			UpdatedNumberScheduled: st.UpdatedNumberScheduled,
			NodesOffline:           st.NodesOffline,
			Rollout:                rolloutView(ro, e),
			RejectedRevision:       rejectedView(e.rec.Rejected),
		},
	}
}

func rolloutView(ro rollout.Status, e *dsEntry) *api.RolloutStatus {
	return &api.RolloutStatus{
		Target: ro.Target, Total: ro.Total, Updated: ro.Updated, Updating: ro.Updating,
		Waiting: ro.Waiting, Offline: ro.Offline, Failed: ro.Failed, Unavailable: ro.Unavailable,
		MaxUnavailable: ro.MaxUnavailable, Complete: ro.Complete, Paused: ro.Paused || e.rollout.OperatorPaused,
		PauseReason: pauseReason(ro, e), RolledBack: ro.RolledBack, RolledBackFrom: ro.RolledBackFrom,
		CanaryWaiting: ro.CanaryWaiting, Strategy: strategyName(e), RollbackReason: ro.RollbackReason,
		WaitingForWindow: ro.WaitingForWindow, NextWindow: timePtr(ro.NextWindow),
		WaitingForPrefetch: ro.WaitingForPrefetch, Prefetch: prefetchView(ro.Prefetch, e),
		HeldByLock: ro.HeldByLock, StaleLocks: ro.StaleLocks,
	}
}

func pauseReason(ro rollout.Status, e *dsEntry) string {
	if ro.PauseReason == "" && e.rollout.OperatorPaused {
		return "paused by the operator (edgesetctl rollout resume)"
	}
	return ro.PauseReason
}

func strategyName(e *dsEntry) string {
	if e.strategy.OnDelete {
		return schema.OnDeleteStrategy
	}
	return schema.RollingUpdateStrategy
}

// GetDaemonSet returns one daemonset with its per-node instances.
func (c *Controller) GetDaemonSet(ctx context.Context, key string) (api.DaemonSet, error) {
	dv, ok := c.state.view(key)
	if !ok || dv.entry.orphan() {
		return api.DaemonSet{}, fmt.Errorf("daemonset %s: %w", key, api.ErrNotFound)
	}
	v := daemonSetView(dv)
	for _, in := range c.instances() {
		if in.DaemonSet == key {
			v.Instances = append(v.Instances, in)
		}
	}
	return v, nil
}

// DeleteDaemonSet deletes a daemonset: its instances are removed from every
// node (offline ones when they return), or with orphan left running.
func (c *Controller) DeleteDaemonSet(ctx context.Context, key string, orphan bool) error {
	c.passMu.Lock()
	defer c.passMu.Unlock()
	if e, ok := c.state.entry(key); !ok || e.orphan() {
		return fmt.Errorf("daemonset %s: %w", key, api.ErrNotFound)
	}
	if orphan {
		rec, err := c.store.MarkDaemonSetDeleted(key, c.now())
		if err != nil {
			return err
		}
		c.state.setRecord(key, rec)
	} else {
		if err := c.store.DeleteDaemonSet(key); err != nil {
			return err
		}
		c.state.deleteEntry(key)
	}
	c.events.add(dsObject(key), schema.EventNormal, "Deleted", fmt.Sprintf("deleted (orphan=%t)", orphan))
	c.wake()
	return nil
}

// ListNodes returns every node, sorted by name.
func (c *Controller) ListNodes(ctx context.Context) ([]api.Node, error) {
	nodes, _ := c.registry.Snapshot(c.now(), c.cfg.NodeOfflineGrace)
	out := make([]api.Node, 0, len(nodes))
	for _, n := range nodes {
		out = append(out, c.nodeView(n))
	}
	return out, nil
}

func (c *Controller) nodeView(n schema.Node) api.Node {
	v := api.Node{Node: n}
	if st, ok := c.registry.State(n.Name); ok {
		v.Online = st.Online
		v.LastSeen = timePtr(st.LastSeen)
		v.OfflineSince = timePtr(st.OfflineSince)
	}
	v.DesiredGeneration, v.ObservedGeneration = c.state.generations(n.Name)
	return v
}

func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

// GetNode returns one node with its instances and, per daemonset, whether
// and why it should run there.
func (c *Controller) GetNode(ctx context.Context, name string) (api.Node, error) {
	now := c.now()
	nodes, _ := c.registry.Snapshot(now, c.cfg.NodeOfflineGrace)
	i := slices.IndexFunc(nodes, func(n schema.Node) bool { return n.Name == name })
	if i < 0 {
		return api.Node{}, c.unknownNode(name, nodes)
	}
	v := c.nodeView(nodes[i])
	if tm, ok := c.telemetry.Get(name); ok {
		v.Telemetry = &tm
	}
	for _, in := range c.instances() {
		if in.Node == name {
			v.Instances = append(v.Instances, in)
		}
	}
	for _, dv := range c.state.views() {
		e := dv.entry
		if e.orphan() {
			continue
		}
		for _, r := range e.policy.Explain(nodes[i:i+1], now) {
			v.Placement = append(v.Placement, api.Placement{Node: r.Node, DaemonSet: r.DaemonSet, Run: r.Run, KeepRunning: r.KeepRunning, Reasons: r.Reasons})
		}
	}
	return v, nil
}

// unknownNode is a not-found error that suggests close names.
func (c *Controller) unknownNode(name string, nodes []schema.Node) error {
	names := make([]string, len(nodes))
	for i, n := range nodes {
		names[i] = n.Name
	}
	msg := fmt.Sprintf("node %q", name)
	if close := api.Suggest(name, names, 3); len(close) > 0 {
		msg += "; did you mean " + strings.Join(close, ", ") + "?"
	}
	return fmt.Errorf("%w: %s", api.ErrNotFound, msg)
}

// DeleteNode forgets a node: its desired state is cleared (so a reachable
// agent removes every edgeset daemon), then dropped, with its overrides and
// its retained announcements. Its record, its overrides and its empty
// desired state are one store transaction, made before the registry
// forgets it: a failed write changes nothing.
//
// The messages go out with passMu held, as a pass publishes its decision:
// were they sent after it, an agent announcing itself again in between
// could get a newer desired state from a pass and then this older empty
// one, retained, or lose its new announcement to the clearing.
func (c *Controller) DeleteNode(ctx context.Context, name string) error {
	c.passMu.Lock()
	defer c.passMu.Unlock()
	m, err := c.deleteNodeLocked(name)
	if err != nil {
		return err
	}
	if err := c.publish(ctx, m.Topic, m.Payload, true); err != nil {
		c.log.Warn("publish empty desired state of deleted node; republished on reconnection", "node", name, "err", err)
	}
	for _, kind := range []string{schema.TopicStatus, schema.TopicOnline, schema.TopicObserved, schema.TopicTelemetry} {
		_ = c.publish(ctx, schema.NodeTopic(name, kind), nil, true)
	}
	c.events.add(nodeObject(name), schema.EventNormal, "Deleted", "node deleted; its daemons are being removed")
	c.wake()
	return nil
}

// deleteNodeLocked is DeleteNode's store transaction and state change,
// with passMu held; it returns the empty desired state to publish.
func (c *Controller) deleteNodeLocked(name string) (mqttclient.Message, error) {
	if _, ok := c.registry.Input(name); !ok {
		return mqttclient.Message{}, fmt.Errorf("node %q: %w", name, api.ErrNotFound)
	}
	// The empty desired state is durable before the API answers, so a
	// controller that crashes now still clears the node on its next start.
	var rec store.DesiredRecord
	err := c.store.Update(false, func(tx *store.Txn) (err error) {
		if err = tx.DeleteNode(name); err != nil {
			return err
		}
		if err = tx.DeleteOverrides(name); err != nil {
			return err
		}
		rec, err = tx.PutDesired(name, store.DesiredRecord{Node: name, Instances: []schema.DesiredInstance{}, PublishedAt: c.now()})
		return err
	})
	if err != nil {
		return mqttclient.Message{}, fmt.Errorf("delete node %s: %w", name, err)
	}
	c.registry.Delete(name)
	c.telemetry.Delete(name)
	nd := reconcile.NodeDesired{Generation: rec.Generation, Instances: rec.Instances}
	c.state.deleteNode(name, nd)
	return desiredMessage(name, nd), nil
}

// ListInstances returns every instance in the fleet.
func (c *Controller) ListInstances(ctx context.Context) ([]api.Instance, error) {
	return c.instances(), nil
}

// instances joins desired and observed instances, sorted by node and
// daemonset.
func (c *Controller) instances() []api.Instance {
	var out []api.Instance
	locks := c.state.lockEntries()
	c.state.eachNode(func(node string, cur reconcile.NodeDesired, obs schema.ObservedState) {
		st, _ := c.registry.State(node)
		for _, d := range cur.Instances {
			in := api.Instance{Node: node, DaemonSet: d.DaemonSet, Revision: d.Revision, Phase: schema.PhasePending, Online: st.Online, LastSeen: timePtr(st.LastSeen)}
			if o := findObserved(obs, d); o != nil {
				in.Phase, in.Ready, in.Restarts, in.Message = o.Phase, o.Ready, o.Restarts, o.Message
			}
			in.Prefetch = instancePrefetch(cur, obs, d.DaemonSet)
			in.UpdateLock = locks[d.DaemonSet].view(node, reportedLock(obs, d.DaemonSet))
			out = append(out, in)
		}
	})
	return out
}

func findObserved(obs schema.ObservedState, d schema.DesiredInstance) *schema.InstanceStatus {
	for i := range obs.Instances {
		if obs.Instances[i].DaemonSet == d.DaemonSet && obs.Instances[i].Revision == d.Revision {
			return &obs.Instances[i]
		}
	}
	return nil
}

// Events returns stored events.
func (c *Controller) Events(ctx context.Context, f api.EventFilter) ([]api.Event, error) {
	if f.Limit == 0 {
		f.Limit = 500
	}
	evs, err := c.store.ListEvents(store.EventFilter{Object: f.Object, SinceSeq: f.SinceSeq, Limit: f.Limit})
	if err != nil {
		return nil, err
	}
	out := make([]api.Event, len(evs))
	for i, e := range evs {
		out[i] = api.Event{Seq: e.Seq, Time: e.Time, Type: e.Type, Reason: e.Reason, Object: e.Object, Message: e.Message,
			Count: e.Count, LastTime: timePtr(e.LastTime), Source: e.Source}
	}
	return out, nil
}

// Version describes the controller.
func (c *Controller) Version(ctx context.Context) api.VersionInfo {
	return api.VersionInfo{Version: schema.Version, Broker: c.transport.Describe()}
}

// Ready is nil once the first reconcile pass is done and while no part
// reports a fault (health.go): a store that cannot persist, a listener
// that stopped accepting.
func (c *Controller) Ready(ctx context.Context) error {
	select {
	case <-c.ready:
		return c.health.err()
	default:
		return fmt.Errorf("%w: waiting for the first reconcile pass", api.ErrUnavailable)
	}
}
