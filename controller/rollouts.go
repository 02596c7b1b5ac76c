package controller

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/edgeset/edgeset/controller/api"
	"github.com/edgeset/edgeset/controller/reconcile"
	"github.com/edgeset/edgeset/controller/rollout"
	"github.com/edgeset/edgeset/controller/store"
	"github.com/edgeset/edgeset/schema"
)

// RestartedAtAnnotation is set on the template by `rollout restart`, making
// a new revision of the same template, as kubectl's restartedAt does.
const RestartedAtAnnotation = "edgeset.io/restartedAt"

// Rollout pauses, resumes, promotes, restarts or undoes a daemonset's
// rollout. The change is durable before it returns.
func (c *Controller) Rollout(ctx context.Context, key string, req api.RolloutRequest) (api.DaemonSet, error) {
	c.passMu.Lock()
	err := c.rolloutLocked(key, req)
	c.passMu.Unlock()
	if err != nil {
		return api.DaemonSet{}, err
	}
	c.wake()
	return c.GetDaemonSet(ctx, key)
}

func (c *Controller) rolloutLocked(key string, req api.RolloutRequest) error {
	e, err := c.entry(key)
	if err != nil {
		return err
	}
	switch req.Action {
	case api.RolloutPause, api.RolloutResume, api.RolloutPromote:
		return c.setRolloutState(e, req.Action)
	case api.RolloutRestart:
		ds := e.rec.DaemonSet
		ds.Spec.Template.Metadata.Annotations = withAnnotation(ds.Spec.Template.Metadata.Annotations,
			RestartedAtAnnotation, c.now().UTC().Format(time.RFC3339))
		return c.reapply(&ds, "rollout restart", applyRequest{keepSource: true})
	case api.RolloutUndo:
		return c.undo(e, req.ToRevision)
	case api.RolloutRetry:
		return c.retry(e)
	}
	return fmt.Errorf("%w: unknown rollout action %q: want pause, resume, restart, promote, undo or retry", api.ErrInvalid, req.Action)
}

// entry returns a copy of a managed (not orphaned) daemonset's entry.
func (c *Controller) entry(key string) (dsEntry, error) {
	e, ok := c.state.entry(key)
	if !ok || e.orphan() {
		return dsEntry{}, fmt.Errorf("daemonset %s: %w", key, api.ErrNotFound)
	}
	return e, nil
}

// setRolloutState stores the rollout state action makes of e's, with
// passMu held (so e is still current), and puts it in the working state.
func (c *Controller) setRolloutState(e dsEntry, action string) error {
	st := e.rollout
	if st.Target == "" {
		st.Target = e.rec.CurrentRevision
	}
	switch action {
	case api.RolloutPause:
		st.OperatorPaused = true
	case api.RolloutResume:
		st.OperatorPaused, st.Paused, st.PauseReason, st.Failed = false, false, "", nil
	case api.RolloutPromote:
		if e.strategy.CanaryNodes == nil {
			return fmt.Errorf("%w: daemonset %s has no canary (spec.rollout.canary) to promote", api.ErrInvalid, e.rec.Key())
		}
		st.CanaryPromoted = true
	}
	err := c.store.Update(false, func(tx *store.Txn) error { return putRolloutTxn(tx, e.rec.Key(), st, nil, true) })
	if err != nil {
		return err
	}
	c.state.setRollout(e.rec.Key(), st)
	c.events.add(dsObject(e.rec.Key()), schema.EventNormal, "Rollout"+titleCase(action), "rollout "+action+" by the operator")
	return nil
}

func titleCase(s string) string {
	if s == "" {
		return s
	}
	return string(s[0]-'a'+'A') + s[1:]
}

func withAnnotation(m map[string]string, k, v string) map[string]string {
	out := make(map[string]string, len(m)+1)
	for key, val := range m {
		out[key] = val
	}
	out[k] = v
	return out
}

// withoutAnnotation returns a copy of m without key k, nil when empty.
func withoutAnnotation(m map[string]string, k string) map[string]string {
	out := make(map[string]string, len(m))
	for key, val := range m {
		if key != k {
			out[key] = val
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// undo makes an earlier revision's template current again.
func (c *Controller) undo(e dsEntry, to int64) error {
	key := e.rec.Key()
	revs, err := c.store.ListRevisions(key)
	if err != nil {
		return err
	}
	target, err := undoTarget(revs, e.rec.CurrentRevision, to)
	if err != nil {
		return fmt.Errorf("%w: daemonset %s: %v", api.ErrInvalid, key, err)
	}
	ds := e.rec.DaemonSet
	ds.Spec.Template = liveTemplate(target.Template)
	return c.reapply(&ds, fmt.Sprintf("rollout undo to revision %d", target.Number), applyRequest{keepSource: true})
}

// liveTemplate is a revision's template as the daemonset's manifest holds
// it: the config hash is the controller's, recomputed for the configs of
// now, and the image pins are the revision's (imagepin.go); neither
// belongs in the operator's manifest.
func liveTemplate(tmpl schema.PodTemplateSpec) schema.PodTemplateSpec {
	for _, k := range []string{ConfigHashAnnotation, schema.ImagePinsAnnotation} {
		if _, ok := tmpl.Metadata.Annotations[k]; ok {
			tmpl.Metadata.Annotations = withoutAnnotation(tmpl.Metadata.Annotations, k)
		}
	}
	return tmpl
}

// retry rolls out again the revision an automatic rollback rejected: its
// template becomes the daemonset's again, and the rejection is cleared.
func (c *Controller) retry(e dsEntry) error {
	key := e.rec.Key()
	rejected := e.rec.Rejected
	if rejected == nil {
		return fmt.Errorf("%w: daemonset %s has no revision rejected by an automatic rollback to retry", api.ErrInvalid, key)
	}
	rev, err := c.store.GetRevision(key, rejected.Hash)
	if err != nil {
		return fmt.Errorf("daemonset %s: rejected revision %d: %w", key, rejected.Number, err)
	}
	ds := e.rec.DaemonSet
	ds.Spec.Template = liveTemplate(rev.Template)
	return c.reapply(&ds, fmt.Sprintf("rollout retry of revision %d", rev.Number), applyRequest{keepSource: true, retry: true})
}

// rollbackTxn records an automatic rollback within the transaction of
// the decision that made it: the rollout state; the daemonset's template
// and current revision become those of the revision rolled back to, so
// that the live object shows what runs (and a diff of the rejected
// manifest shows the difference); and the rejected revision with why. It
// returns the daemonset's new record.
func rollbackTxn(tx *store.Txn, key string, st rollout.State, now time.Time) (store.DaemonSetRecord, error) {
	if err := putRolloutTxn(tx, key, st, nil, true); err != nil {
		return store.DaemonSetRecord{}, err
	}
	to, err := tx.GetRevision(key, st.Target)
	if err != nil {
		return store.DaemonSetRecord{}, fmt.Errorf("record rollback of daemonset %s: %w", key, err)
	}
	rejected := store.RejectedRevision{Hash: st.RolledBackFrom, Reason: st.RollbackReason, Time: now}
	if bad, err := tx.GetRevision(key, st.RolledBackFrom); err == nil {
		rejected.Number = bad.Number
	}
	rec, err := tx.RollBack(key, liveTemplate(to.Template), to.Hash, rejected, now)
	if err != nil {
		return store.DaemonSetRecord{}, fmt.Errorf("record rollback of daemonset %s: %w", key, err)
	}
	return rec, nil
}

// rejectedMessage tells an operator who applies a rejected template again
// what happened and how to roll it out anyway.
func rejectedMessage(ds *schema.DaemonSet, r *store.RejectedRevision) string {
	return fmt.Sprintf("revision %d (%s) was rolled back automatically (%s); the live template stays the one rolled back to; "+
		"run `edgesetctl rollout retry daemonset %s -n %s` to roll it out again",
		r.Number, shortHash(r.Hash), orUnknown(r.Reason), ds.Metadata.Name, ds.Metadata.Namespace)
}

func shortHash(h string) string {
	if len(h) > 10 {
		return h[:10]
	}
	return h
}

func orUnknown(s string) string {
	if s == "" {
		return "reason not recorded"
	}
	return s
}

// rejectedView is the API form of a rejected revision.
func rejectedView(r *store.RejectedRevision) *api.RejectedRevision {
	if r == nil {
		return nil
	}
	return &api.RejectedRevision{Hash: r.Hash, Revision: r.Number, Reason: r.Reason, Time: r.Time}
}

// undoTarget picks revision to, or the newest revision older than the
// current one.
func undoTarget(revs []store.Revision, current string, to int64) (store.Revision, error) {
	slices.SortFunc(revs, func(a, b store.Revision) int { return int(a.Number - b.Number) })
	cur := slices.IndexFunc(revs, func(r store.Revision) bool { return r.Hash == current })
	if to != 0 {
		i := slices.IndexFunc(revs, func(r store.Revision) bool { return r.Number == to })
		if i < 0 {
			return store.Revision{}, fmt.Errorf("no revision %d (see `edgesetctl rollout history`)", to)
		}
		return revs[i], nil
	}
	if cur <= 0 {
		return store.Revision{}, fmt.Errorf("no revision before the current one to roll back to")
	}
	return revs[cur-1], nil
}

// reapply stores a changed daemonset as an operator action.
func (c *Controller) reapply(ds *schema.DaemonSet, cause string, req applyRequest) error {
	ds.Metadata.Annotations = withAnnotation(ds.Metadata.Annotations, ChangeCauseAnnotation, cause)
	objs := []schema.Object{{DaemonSet: ds}}
	if err := checkObjects(objs, deliveryLimit); err != nil {
		return err
	}
	results, err := c.applyObjectsLocked(objs, nil, req)
	if err != nil {
		return err
	}
	res := results[0]
	c.events.add(dsObject(res.Key), schema.EventNormal, "RolloutChanged", fmt.Sprintf("%s: revision %d", cause, res.Revision))
	return nil
}

// RolloutHistory lists a daemonset's revisions, oldest first, with how many
// nodes are asked to run each.
func (c *Controller) RolloutHistory(ctx context.Context, key string) ([]api.Revision, error) {
	e, err := c.entry(key)
	if err != nil {
		return nil, err
	}
	revs, err := c.store.ListRevisions(key)
	if err != nil {
		return nil, err
	}
	slices.SortFunc(revs, func(a, b store.Revision) int { return int(a.Number - b.Number) })
	nodes := c.state.nodesPerRevision(key)
	out := make([]api.Revision, 0, len(revs))
	for _, r := range revs {
		v := api.Revision{Number: r.Number, Hash: r.Hash, ChangeCause: r.ChangeCause, CreatedAt: r.CreatedAt,
			Current: r.Hash == e.rec.CurrentRevision, Nodes: nodes[r.Hash], Images: []string{}, Pins: revisionPins(r.Template)}
		for _, ctr := range r.Template.Spec.Containers {
			v.Images = append(v.Images, ctr.Image)
		}
		out = append(out, v)
	}
	return out, nil
}

// DeleteInstance removes a daemonset's instance from one node, as deleting
// its pod does in Kubernetes: under OnDelete the node then gets the current
// revision; under RollingUpdate it is recreated at once. Durable before it
// returns.
func (c *Controller) DeleteInstance(ctx context.Context, key, node string) error {
	c.passMu.Lock()
	defer c.passMu.Unlock()
	if _, err := c.entry(key); err != nil {
		return err
	}
	cur, ok := c.state.currentOf(node)
	kept := slices.DeleteFunc(slices.Clone(cur.Instances), func(in schema.DesiredInstance) bool { return in.DaemonSet == key })
	if !ok || len(kept) == len(cur.Instances) {
		return fmt.Errorf("%w: daemonset %s has no instance on node %q", api.ErrNotFound, key, node)
	}
	// The config references stay until the next pass recomputes them.
	rec, err := c.store.PutDesired(node, store.DesiredRecord{Node: node, Instances: kept,
		ConfigMaps: cur.ConfigMaps, Secrets: cur.Secrets, Prefetch: cur.Prefetch, PublishedAt: c.now()})
	if err != nil {
		return err
	}
	c.state.setCurrent(node, reconcile.NodeDesired{Generation: rec.Generation, Instances: kept,
		ConfigMaps: cur.ConfigMaps, Secrets: cur.Secrets, Prefetch: cur.Prefetch})

	c.events.add(dsObject(key), schema.EventNormal, "InstanceDeleted", "instance on node "+node+" deleted by the operator")
	c.wake()
	return nil
}
