package controller

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/edgeset/edgeset/controller/api"
	"github.com/edgeset/edgeset/controller/placement"
	"github.com/edgeset/edgeset/controller/store"
	"github.com/edgeset/edgeset/schema"
)

// ApplyManifests decodes, validates and applies every object of data
// (DaemonSets, ConfigMaps, Secrets) in one store transaction: nothing is
// applied unless every object is valid and deliverable, and everything is
// durable before it returns. An unchanged manifest is a no-op. Every
// object applied records opts.Source as who applied it last. A dry run
// computes the same results and keeps nothing.
func (c *Controller) ApplyManifests(ctx context.Context, source string, data []byte, opts api.ApplyOptions) ([]api.ApplyResult, error) {
	objs, warnings, err := schema.Decode(source, data)
	if err != nil {
		return nil, err
	}
	return c.applyObjects(objs, warnings, applyRequest{dryRun: opts.DryRun, source: opts.Source})
}

// applyRequest qualifies applyObjects.
type applyRequest struct {
	dryRun bool
	source string
	// keepSource leaves the daemonsets' recorded source as it is (an
	// operator's rollout action is not an apply).
	keepSource bool
	// retry rolls out a template an automatic rollback rejected (rollout
	// retry); an apply of it keeps the template rolled back to.
	retry bool
	// prune names objects ("kind/namespace/name") to delete in the same
	// transaction, each only while its recorded source is still source
	// (a manifest file's sync, see manifests.go).
	prune []string
}

// applyObjects checks and applies decoded objects as one request.
func (c *Controller) applyObjects(objs []schema.Object, warnings []schema.Warning, req applyRequest) ([]api.ApplyResult, error) {
	if err := checkObjects(objs, deliveryLimit); err != nil {
		return nil, err
	}
	c.passMu.Lock()
	defer c.passMu.Unlock()
	return c.applyObjectsLocked(objs, warnings, req)
}

// applyObjectsLocked is applyObjects for checked objects, with passMu
// held.
func (c *Controller) applyObjectsLocked(objs []schema.Object, warnings []schema.Warning, req applyRequest) ([]api.ApplyResult, error) {
	out, err := c.applyLocked(objs, warnings, req)
	if err != nil {
		return nil, err
	}
	return out.results, nil
}

// applyLocked is applyObjectsLocked returning everything the request
// changed. The whole request is one store transaction: when any write of
// it fails, nothing of it is kept, and the error names the object whose
// write failed or, for a commit the disk refused, the request.
func (c *Controller) applyLocked(objs []schema.Object, warnings []schema.Warning, req applyRequest) (*applied, error) {
	now := c.now()
	var out *applied
	err := c.store.Update(req.dryRun, func(tx *store.Txn) (err error) {
		out, err = c.applyTxn(tx, objs, req, now)
		return err
	})
	if err != nil {
		var verr *schema.ValidationError
		if errors.As(err, &verr) || errors.Is(err, api.ErrInvalid) {
			return nil, err
		}
		return nil, fmt.Errorf("nothing applied: store %s: %w", describeRequest(objs, req), err)
	}
	for i := range out.results {
		out.results[i].Warnings = warningsFor(warnings, objs[i].Source)
	}
	if req.dryRun {
		return out, nil
	}
	if err := c.commit(out); err != nil {
		return out, err
	}
	c.wake()
	return out, nil
}

// describeRequest says what a request stores, for an error that names
// no single object: "3 objects (a.yaml:1 ... b.yaml:40)".
func describeRequest(objs []schema.Object, req applyRequest) string {
	n := len(objs) + len(req.prune)
	what := fmt.Sprintf("%d object(s)", n)
	switch {
	case len(objs) == 1:
		what = fmt.Sprintf("1 object (%s)", sourcePlace(objs[0].Source))
	case len(objs) > 1:
		what += fmt.Sprintf(" (%s ... %s)", sourcePlace(objs[0].Source), sourcePlace(objs[len(objs)-1].Source))
	}
	return what
}

// applied is what one request changed, for the working state once the
// transaction committed.
type applied struct {
	results    []api.ApplyResult // one per object, in order
	daemonSets map[string]dsChange
	// deleted are the daemonsets the request deleted (pruned).
	deleted    map[string]bool
	pruned     []string                          // objects deleted, by objectName
	configMaps map[string]*store.ConfigMapRecord // nil: deleted
	secrets    map[string]*store.SecretRecord    // nil: deleted
	events     []pendingEvent
}

// dsChange is a daemonset the request stored or moved to a new revision.
type dsChange struct {
	rec store.DaemonSetRecord
	rev store.Revision
}

type pendingEvent struct{ object, reason, message string }

func newApplied() *applied {
	return &applied{
		daemonSets: map[string]dsChange{},
		deleted:    map[string]bool{},
		configMaps: map[string]*store.ConfigMapRecord{},
		secrets:    map[string]*store.SecretRecord{},
	}
}

func (a *applied) event(object, reason, message string) {
	a.events = append(a.events, pendingEvent{object, reason, message})
}

// applyTxn stores the objects: config objects first, so the daemonsets'
// effective templates see them, then the deletions of req.prune, then the
// daemonsets, then the revisions of every other daemonset that rolls on a
// config change this request made, and last the trimmed revision
// histories. A failed write is named by its object.
func (c *Controller) applyTxn(tx *store.Txn, objs []schema.Object, req applyRequest, now time.Time) (*applied, error) {
	out := newApplied()
	out.results = make([]api.ApplyResult, len(objs))
	changed := configChanges{}
	for i, obj := range objs {
		var err error
		switch {
		case obj.ConfigMap != nil:
			out.results[i], err = applyConfigMap(tx, *obj.ConfigMap, req.source, now, out, changed)
		case obj.Secret != nil:
			out.results[i], err = applySecret(tx, *obj.Secret, req.source, now, out, changed)
		}
		if err != nil {
			return nil, objectError(obj, err)
		}
	}
	if err := pruneTxn(tx, req, out, changed); err != nil {
		return nil, err
	}
	for i, obj := range objs {
		if obj.DaemonSet == nil {
			continue
		}
		r, err := c.applyDaemonSetTxn(tx, obj.DaemonSet, req, changed, now, out)
		if err != nil {
			return nil, objectError(obj, err)
		}
		out.results[i] = r
	}
	if err := rollOnConfigChanges(tx, changed, c.imageResolver(), now, out); err != nil {
		return nil, err
	}
	if req.dryRun {
		return out, nil // pruning changes no result
	}
	return out, c.pruneHistoriesTxn(tx, out)
}

// pruneHistoriesTxn trims the revision history of every daemonset the
// request stored, in its transaction.
func (c *Controller) pruneHistoriesTxn(tx *store.Txn, out *applied) error {
	for _, key := range sortedKeys(out.daemonSets) {
		if err := c.pruneRevisionsTxn(tx, out.daemonSets[key].rec); err != nil {
			return fmt.Errorf("prune revisions of daemonset %s: %w", key, err)
		}
	}
	return nil
}

// objectError names the object whose write failed and where it was
// declared; a refusal the API reports as such (ErrInvalid) is kept as it
// is.
func objectError(obj schema.Object, err error) error {
	if errors.Is(err, api.ErrInvalid) {
		return err
	}
	name, _ := objectID(obj)
	return fmt.Errorf("%s (%s): %w", name, sourcePlace(obj.Source), err)
}

// pruneTxn deletes the objects req.prune names that still record
// req.source as theirs; a deleted config object counts as changed, so the
// daemonsets that roll on it get a new revision.
func pruneTxn(tx *store.Txn, req applyRequest, out *applied, changed configChanges) error {
	for _, obj := range req.prune {
		kind, key, _ := strings.Cut(obj, "/")
		var deleted bool
		var err error
		switch kind + "/" {
		case configMapObject:
			deleted, err = pruneConfig(key, req.source, func(k string) (string, bool, error) {
				rec, found, err := tx.GetConfigMap(k)
				return rec.Source, found, err
			}, tx.DeleteConfigMap)
			if deleted {
				out.configMaps[key], changed[configMapObject+key] = nil, true
			}
		case secretObject:
			deleted, err = pruneConfig(key, req.source, func(k string) (string, bool, error) {
				rec, found, err := tx.GetSecret(k)
				return rec.Source, found, err
			}, tx.DeleteSecret)
			if deleted {
				out.secrets[key], changed[secretObject+key] = nil, true
			}
		default:
			deleted, err = pruneDaemonSet(tx, key, req.source)
			if deleted {
				out.deleted[key] = true
			}
		}
		if err != nil {
			return fmt.Errorf("prune %s: %w", obj, err)
		}
		if deleted {
			out.pruned = append(out.pruned, obj)
			out.event(obj, "Deleted", "pruned: no longer in "+strings.TrimPrefix(req.source, fileSourcePrefix))
		}
	}
	return nil
}

// pruneConfig deletes a config object whose source is still source;
// get returns the recorded source.
func pruneConfig(key, source string, get func(string) (string, bool, error), del func(string) (bool, error)) (bool, error) {
	src, found, err := get(key)
	if err != nil || !found || src != source {
		return false, err
	}
	return del(key)
}

// pruneDaemonSet deletes a live daemonset whose source is still source.
func pruneDaemonSet(tx *store.Txn, key, source string) (bool, error) {
	rec, found, err := tx.GetDaemonSet(key)
	if err != nil || !found || rec.DeletedAt != nil || rec.Source != source {
		return false, err
	}
	return true, tx.DeleteDaemonSet(key)
}

// applyDaemonSetTxn stores one daemonset and makes its effective template a
// revision; the revision becomes current when the daemonset changed, is
// new, or references a config object the request changed under
// rollOnConfigChange. An unchanged daemonset keeps its current revision
// (one an undo chose, for instance).
func (c *Controller) applyDaemonSetTxn(tx *store.Txn, ds *schema.DaemonSet, req applyRequest, changed configChanges, now time.Time, out *applied) (api.ApplyResult, error) {
	key := ds.Key()
	res := api.ApplyResult{Kind: schema.KindDaemonSet, Key: key}
	old, existed, err := tx.GetDaemonSet(key)
	if err != nil {
		return res, err
	}
	live := existed && old.DeletedAt == nil
	rejected := rejectedTemplate(tx, old, live, ds, req)
	if rejected != nil {
		kept := *ds
		kept.Spec.Template = old.DaemonSet.Spec.Template
		ds = &kept
	}
	if req.dryRun {
		res.NodesBefore, res.NodesAfter = c.dryRunNodes(old, live, ds)
	}
	rec, dsChanged, err := tx.PutDaemonSet(ds, now)
	if err != nil {
		return res, err
	}
	if !req.keepSource {
		if rec, _, err = tx.SetDaemonSetSource(key, req.source); err != nil {
			return res, err
		}
	}
	move := dsChanged || rec.CurrentRevision == "" || rollsOnConfigChange(&rec.DaemonSet) && changed.affects(&rec.DaemonSet)
	rec, rev, err := moveToEffective(tx, rec, ds.Metadata.Annotations[ChangeCauseAnnotation], move, c.imageResolver(), now)
	if err != nil {
		return res, err
	}
	res.Action = applyAction(live, dsChanged)
	res.Generation, res.Revision = rec.Generation, rev.Number
	out.daemonSets[key] = dsChange{rec: rec, rev: rev}
	if rejected != nil {
		res.Action, res.Message = api.ActionRolledBack, rejectedMessage(&rec.DaemonSet, rejected)
		if !dsChanged {
			return res, nil
		}
	}
	if res.Action != api.ActionUnchanged {
		out.event(dsObject(key), "Applied", fmt.Sprintf("%s: generation %d, revision %d", res.Action, rec.Generation, rev.Number))
	}
	return res, nil
}

// rejectedTemplate returns the revision an automatic rollback rejected when
// ds, applied over the live record old, carries that revision's template
// again (and the request is not a rollout retry): such an apply keeps the
// template rolled back to.
func rejectedTemplate(tx *store.Txn, old store.DaemonSetRecord, live bool, ds *schema.DaemonSet, req applyRequest) *store.RejectedRevision {
	if !live || old.Rejected == nil || req.retry {
		return nil
	}
	if !isRevisionOf(tx, old.Key(), old.Rejected.Hash, effectiveTemplate(ds, txConfigVersions(tx))) {
		return nil
	}
	return old.Rejected
}

// moveToEffective ensures the revision of rec's effective template,
// its images pinned by resolver (imagepin.go), and, with move, makes it
// current; a move to another revision clears the revision an automatic
// rollback rejected, which no longer describes the daemonset.
func moveToEffective(tx *store.Txn, rec store.DaemonSetRecord, cause string, move bool, resolver ImageResolver, now time.Time) (store.DaemonSetRecord, store.Revision, error) {
	key := rec.Key()
	tmpl, err := pinnedTemplateTxn(tx, rec, effectiveTemplate(&rec.DaemonSet, txConfigVersions(tx)), resolver)
	if err != nil {
		return rec, store.Revision{}, err
	}
	rev, _, err := tx.EnsureRevision(key, tmpl, cause, now)
	if err != nil {
		return rec, rev, err
	}
	if move && rec.CurrentRevision != rev.Hash {
		if rec, _, err = tx.SetCurrentRevision(key, rev.Hash, now); err != nil {
			return rec, rev, err
		}
		if rec, _, err = tx.SetRejected(key, nil); err != nil {
			return rec, rev, err
		}
	}
	return rec, rev, nil
}

// rollOnConfigChanges gives every stored daemonset with rollOnConfigChange
// that the request did not apply itself, and that references a config
// object the request changed, the revision of its new effective template.
func rollOnConfigChanges(tx *store.Txn, changed configChanges, resolver ImageResolver, now time.Time, out *applied) error {
	if len(changed) == 0 {
		return nil
	}
	recs, err := tx.ListDaemonSets()
	if err != nil {
		return err
	}
	for _, rec := range recs {
		if _, done := out.daemonSets[rec.Key()]; done || rec.DeletedAt != nil || !rollsOnConfigChange(&rec.DaemonSet) ||
			!changed.affects(&rec.DaemonSet) {
			continue
		}
		before := rec.CurrentRevision
		rec, rev, err := moveToEffective(tx, rec, "config change: "+changed.names(&rec.DaemonSet), true, resolver, now)
		if err != nil {
			return err
		}
		if rec.CurrentRevision != before {
			out.daemonSets[rec.Key()] = dsChange{rec: rec, rev: rev}
			out.event(dsObject(rec.Key()), "ConfigChanged",
				fmt.Sprintf("revision %d for a change of %s (spec.rollout.rollOnConfigChange)", rev.Number, changed.names(&rec.DaemonSet)))
		}
	}
	return nil
}

func applyAction(existed, changed bool) api.ApplyAction {
	switch {
	case !existed:
		return api.ActionCreated
	case changed:
		return api.ActionConfigured
	}
	return api.ActionUnchanged
}

// dryRunNodes counts the nodes placement puts the old and the new
// daemonset on now.
func (c *Controller) dryRunNodes(old store.DaemonSetRecord, live bool, ds *schema.DaemonSet) (before, after int) {
	now := c.now()
	nodes, _ := c.registry.Snapshot(now, c.cfg.NodeOfflineGrace)
	if live {
		before = placedNodes(&old.DaemonSet, nodes, now)
	}
	return before, placedNodes(ds, nodes, now)
}

// commit puts what a committed request changed into the working state and
// records its events.
func (c *Controller) commit(out *applied) error {
	c.state.applyConfigs(out)

	for _, e := range out.events {
		c.events.add(e.object, schema.EventNormal, e.reason, e.message)
	}
	for _, key := range sortedKeys(out.daemonSets) {
		if err := c.remember(out.daemonSets[key].rec); err != nil {
			return err
		}
	}
	return nil
}

// checkObjects refuses, with every problem and its field path, what the
// controller could not run or deliver: a daemonset that placement rejects
// or whose revision message would not fit limit, and a config object
// over schema.MaxConfigSize or whose message would not fit limit.
func checkObjects(objs []schema.Object, limit int) error {
	var verr schema.ValidationError
	add := func(src schema.Source, field, msg string) {
		verr.Errors = append(verr.Errors, schema.FieldError{File: src.File, Line: src.Line, Field: field, Message: msg})
	}
	seen := map[string]schema.Source{}
	for _, obj := range objs {
		if name, ok := objectID(obj); ok {
			if first, dup := seen[name]; dup {
				add(obj.Source, "metadata.name", fmt.Sprintf("%s is declared twice in one request, here and at %s; declare each object once",
					name, sourcePlace(first)))
			} else {
				seen[name] = obj.Source
			}
		}
		switch {
		case obj.DaemonSet != nil:
			checkDaemonSet(obj.DaemonSet, limit, func(f, m string) { add(obj.Source, f, m) })
		case obj.ConfigMap != nil:
			checkConfigMap(obj.ConfigMap, limit, func(f, m string) { add(obj.Source, f, m) })
		case obj.Secret != nil:
			checkSecret(obj.Secret, limit, func(f, m string) { add(obj.Source, f, m) })
		default:
			add(obj.Source, "kind", "only DaemonSet, ConfigMap and Secret objects can be applied")
		}
	}
	if len(verr.Errors) > 0 {
		return &verr
	}
	return nil
}

// objectID names an object by kind, namespace and name, as its apply
// result does ("daemonset/ns/name").
func objectID(obj schema.Object) (string, bool) {
	switch {
	case obj.DaemonSet != nil:
		return objectName(schema.KindDaemonSet, obj.DaemonSet.Key()), true
	case obj.ConfigMap != nil:
		return objectName(schema.KindConfigMap, obj.ConfigMap.Key()), true
	case obj.Secret != nil:
		return objectName(schema.KindSecret, obj.Secret.Key()), true
	}
	return "", false
}

// sourcePlace is "file:line" of src, or what of it is known.
func sourcePlace(src schema.Source) string {
	place := cmp.Or(src.File, "the request")
	if src.Line > 0 {
		place += fmt.Sprintf(":%d", src.Line)
	}
	return place
}

func checkDaemonSet(ds *schema.DaemonSet, limit int, add func(field, msg string)) {
	if _, err := placement.Compile(ds); err != nil {
		for _, fe := range placementErrors(err) {
			add(fe.Path, fe.Detail)
		}
	}
	tmpl := ds.Spec.Template
	tmpl.Metadata.Annotations = withAnnotation(tmpl.Metadata.Annotations, ConfigHashAnnotation, "00000000000000000000")
	tmpl = worstCasePins(tmpl)
	if n := messageSize(schema.Revision{SchemaVersion: schema.WireVersion, Hash: schema.TemplateHash(tmpl),
		DaemonSet: ds.Key(), Number: 1 << 40, Template: tmpl}); n > limit {
		add("spec.template", fmt.Sprintf("daemonset %s: its revision message is %d bytes, over the limit of %d bytes "+
			"that the broker can deliver (max packet size %d)", ds.Key(), n, limit, maxPacketSize))
	}
}
