package controller

import (
	"fmt"
	"time"

	"github.com/edgeset/edgeset/controller/placement"
	"github.com/edgeset/edgeset/controller/reconcile"
	"github.com/edgeset/edgeset/controller/registry"
	"github.com/edgeset/edgeset/controller/rollout"
	"github.com/edgeset/edgeset/controller/store"
	"github.com/edgeset/edgeset/schema"
)

// fleetState is the controller's working copy of what the store holds plus
// what the fleet reports. Controller.mu guards it.
type fleetState struct {
	daemonsets map[string]*dsEntry
	// current is what was last published (or is about to be) per node.
	current map[string]reconcile.NodeDesired
	// observed is what each node last reported it runs.
	observed map[string]schema.ObservedState
	// revisions are the templates referenced by current desired states,
	// by hash, so they can be republished.
	revisions map[string]schema.Revision
	// status is the last computed status of each daemonset.
	status map[string]dsStatus
	// dirtyNodes are nodes whose record must be written to the store.
	dirtyNodes map[string]bool
	// configMaps and secrets are every stored config object by
	// "namespace/name"; revisionRefs the config references of every
	// stored revision's template, by revision hash.
	configMaps   map[string]store.ConfigMapRecord
	secrets      map[string]store.SecretRecord
	revisionRefs map[string]schema.ConfigRefs
	// topics are the config object topics published retained (config.go).
	topics configTopics
	// deletedNodes were deleted by the operator: their empty desired state
	// is published once, then they are forgotten. A node with a desired
	// state that is merely unknown to the registry (a restarted controller
	// that has not heard from it yet) keeps its desired state untouched.
	deletedNodes map[string]bool
	// work marks what changed since the last reconcile pass (work.go).
	work work
}

// dsEntry is a daemonset with what the controller derived from it.
type dsEntry struct {
	rec      store.DaemonSetRecord
	revision int64 // number of rec.CurrentRevision
	policy   *placement.Policy
	strategy rollout.Strategy
	rollout  rollout.State
}

// orphan reports whether the daemonset was deleted leaving its instances.
func (e *dsEntry) orphan() bool { return e.rec.DeletedAt != nil }

// dsStatus is a daemonset's computed status.
type dsStatus struct {
	reconcile.DaemonSetStatus
	Rollout rollout.Status
}

// loadFleetState reads the store into memory and primes the registry with
// the last known nodes and overrides.
func loadFleetState(st *store.Store, reg *registry.Registry, grace time.Duration) (*fleetState, error) {
	fs := &fleetState{
		daemonsets:   map[string]*dsEntry{},
		current:      map[string]reconcile.NodeDesired{},
		observed:     map[string]schema.ObservedState{},
		revisions:    map[string]schema.Revision{},
		status:       map[string]dsStatus{},
		dirtyNodes:   map[string]bool{},
		deletedNodes: map[string]bool{},
		configMaps:   map[string]store.ConfigMapRecord{},
		secrets:      map[string]store.SecretRecord{},
		revisionRefs: map[string]schema.ConfigRefs{},
		topics:       newConfigTopics(),
		work:         newWork(),
	}
	steps := []func(*store.Store, *registry.Registry, time.Duration) error{
		fs.loadDaemonSets, fs.loadConfigs, fs.loadDesired, fs.loadNodes,
	}
	for _, step := range steps {
		if err := step(st, reg, grace); err != nil {
			return nil, err
		}
	}
	return fs, nil
}

func (fs *fleetState) loadDaemonSets(st *store.Store, _ *registry.Registry, grace time.Duration) error {
	recs, err := st.ListDaemonSets()
	if err != nil {
		return err
	}
	for _, rec := range recs {
		e, err := newEntry(st, rec, grace)
		if err != nil {
			return err
		}
		fs.daemonsets[rec.Key()] = e
	}
	return nil
}

// newEntry compiles a stored daemonset and loads its rollout state.
func newEntry(st *store.Store, rec store.DaemonSetRecord, grace time.Duration) (*dsEntry, error) {
	e := &dsEntry{rec: rec, strategy: rollout.FromSpec(&rec.DaemonSet.Spec, grace)}
	var err error
	if e.policy, err = placement.Compile(&rec.DaemonSet); err != nil {
		return nil, fmt.Errorf("compile stored daemonset %s: %w", rec.Key(), err)
	}
	if _, err := st.GetRollout(rec.Key(), &e.rollout); err != nil {
		return nil, err
	}
	if rev, err := st.GetRevision(rec.Key(), rec.CurrentRevision); err == nil {
		e.revision = rev.Number
	}
	return e, nil
}

func (fs *fleetState) loadDesired(st *store.Store, _ *registry.Registry, _ time.Duration) error {
	recs, err := st.ListDesired()
	if err != nil {
		return err
	}
	for _, rec := range recs {
		fs.current[rec.Node] = reconcile.NodeDesired{Generation: rec.Generation, Instances: rec.Instances,
			ConfigMaps: rec.ConfigMaps, Secrets: rec.Secrets}
		fs.topics.load(rec.Node, rec.ConfigMaps, rec.Secrets)
		for _, in := range rec.Instances {
			if _, ok := fs.revisions[in.Revision]; ok {
				continue
			}
			if rev, err := st.GetRevision(in.DaemonSet, in.Revision); err == nil {
				fs.revisions[in.Revision] = rev.Wire()
			}
		}
	}
	return nil
}

func (fs *fleetState) loadNodes(st *store.Store, reg *registry.Registry, _ time.Duration) error {
	nodes, err := st.ListNodes()
	if err != nil {
		return err
	}
	for _, n := range nodes {
		status := n.Status
		since := n.OfflineSince
		if n.Online {
			since = n.LastSeen
		}
		reg.Put(registry.NodeInput{
			Name:     n.Name,
			Status:   &status,
			Presence: registry.Presence{Known: true, Online: n.Online, Session: n.Session, Since: since},
		}, n.LastSeen)
	}
	overrides, err := st.ListOverrides()
	if err != nil {
		return err
	}
	for _, o := range overrides {
		reg.SetOverrides(o.Node, overridesFromStore(o), o.UpdatedAt)
	}
	return nil
}

func overridesFromStore(o store.NodeOverrides) registry.Overrides {
	return registry.Overrides{Labels: o.Labels, Taints: o.Taints, RemovedTaints: o.RemovedTaints, Unschedulable: o.Unschedulable}
}
