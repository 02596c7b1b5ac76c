package controller

import (
	"fmt"
	"sync"
	"time"

	"github.com/edgeset/edgeset/controller/placement"
	"github.com/edgeset/edgeset/controller/reconcile"
	"github.com/edgeset/edgeset/controller/registry"
	"github.com/edgeset/edgeset/controller/rollout"
	"github.com/edgeset/edgeset/controller/store"
	"github.com/edgeset/edgeset/schema"
)

// fleetState is the controller's working copy of what the store holds plus
// what the fleet reports. It owns its mutex: every field below mu is
// guarded by it and reached only through fleetState's methods (state*.go),
// which hand out copies of values, never a pointer into the state.
//
// Invariant: every change to what a reconcile pass decides on (a node's
// observed or current desired state, its deletion, a daemonset entry, a
// config object or a revision's references) marks its work (work.go) in
// the same critical section, so the next incremental pass sees it. The one
// exception is the pass's own decision, which the decider made: its
// desired states are handed to the decider in the same call
// (commitDecision), which replans the nodes as a mark would, and its
// rollout states are the decider's own already (commitRollouts).
//
// Lock order, relied on throughout the controller: Controller.passMu, then
// fleetState.mu; the registry's and the event sink's own locks are leaves
// that may be taken while fleetState.mu is held (a read function that asks
// the registry for a node's presence), never the other way round. Nothing
// takes passMu while holding fleetState.mu. passMu serialises whoever
// stores a decision or a daemonset change (the reconcile pass and the
// API's writers); fleetState.mu only keeps each read or write whole.
type fleetState struct {
	mu sync.Mutex

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
	// lagMarks are the nodes whose lag behind their desired state (or
	// presence) may have changed since the repair loop last took them,
	// each with the desired generation it lags behind as of its last
	// change (0: none); nil until that loop starts tracking lags
	// (trackLags).
	lagMarks map[string]uint64
	// siteLabel is the controller's site-label: the prefetch topology key
	// of the daemonsets that name none. Set once, before the first pass.
	siteLabel string
}

// dsEntry is a daemonset with what the controller derived from it. The
// state holds entries by pointer and hands out copies: a copy's record and
// compiled policy are never modified in place (a change replaces them).
type dsEntry struct {
	rec      store.DaemonSetRecord
	revision int64 // number of rec.CurrentRevision
	policy   *placement.Policy
	strategy rollout.Strategy
	// rollout is the state last stored. After a pass it is the decider's
	// (commitRollouts): its per-node maps are the rollout tracker's, which
	// the next pass changes in place, so they are read only with passMu
	// held (the pass, the operator's rollout actions); a reader holding
	// only fleetState.mu reads rollout's scalars and locks, never its maps.
	rollout rollout.State
	// rolloutWhole: the stored rollout record is a whole state, written
	// before states were stored in parts; the next write of the rollout
	// state replaces it (loadRollout).
	rolloutWhole bool
	// locks are rollout's update lock entries, copied for API reads
	// (updatelocks.go): set with rollout.
	locks lockEntries
}

// orphan reports whether the daemonset was deleted leaving its instances.
func (e *dsEntry) orphan() bool { return e.rec.DeletedAt != nil }

// dsStatus is a daemonset's computed status.
type dsStatus struct {
	reconcile.DaemonSetStatus
	Rollout rollout.Status
}

// The marks below are made with mu held, by the methods that change what
// they mark.

// markNodeLocked records that node's facts changed (its model, presence,
// observed or published state).
func (fs *fleetState) markNodeLocked(node string) {
	fs.work.nodes[node] = true
	fs.markLagLocked(node)
}

// markLagLocked records node's lag, which may have changed, for the
// repair loop, once it tracks lags. It is computed here, with the change,
// so that taking the marks is a swap: a fleet-wide change does not make
// the repair loop hold the lock over every node.
func (fs *fleetState) markLagLocked(node string) {
	if fs.lagMarks != nil {
		fs.lagMarks[node] = fs.lagLocked(node)
	}
}

// markDaemonSetLocked records that daemonset key changed (spec, revision,
// rollout state, deletion).
func (fs *fleetState) markDaemonSetLocked(key string) { fs.work.daemonsets[key] = true }

// markConfigsLocked records that a config object or a revision's
// references changed.
func (fs *fleetState) markConfigsLocked() { fs.work.configs = true }

// takeWorkLocked returns the marks and clears them.
func (fs *fleetState) takeWorkLocked() work {
	w := fs.work
	fs.work = newWork()
	return w
}

// takeWork returns the marks made since the last call and clears them.
func (fs *fleetState) takeWork() work {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	return fs.takeWorkLocked()
}

// newFleetState returns an empty state.
func newFleetState() *fleetState {
	return &fleetState{
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
}

// loadFleetState reads the store into memory and primes the registry with
// the last known nodes and overrides.
func loadFleetState(st *store.Store, reg *registry.Registry, grace time.Duration) (*fleetState, error) {
	fs := newFleetState()
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
	e, err := compileEntry(st, rec, grace)
	if err != nil {
		return nil, err
	}
	if e.rollout, _, e.rolloutWhole, err = loadRollout(st, rec.Key()); err != nil {
		return nil, err
	}
	e.locks = lockEntriesOf(e.rollout)
	return e, nil
}

// compileEntry is newEntry without the rollout state, for a daemonset
// whose rollout the working state holds already (putEntry keeps it).
func compileEntry(st *store.Store, rec store.DaemonSetRecord, grace time.Duration) (*dsEntry, error) {
	e := &dsEntry{rec: rec, strategy: rollout.FromSpec(&rec.DaemonSet.Spec, grace)}
	var err error
	if e.policy, err = placement.Compile(&rec.DaemonSet); err != nil {
		return nil, fmt.Errorf("compile stored daemonset %s: %w", rec.Key(), err)
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
		nd := reconcile.NodeDesired{Generation: rec.Generation, Instances: rec.Instances,
			ConfigMaps: rec.ConfigMaps, Secrets: rec.Secrets, Prefetch: rec.Prefetch}
		fs.current[rec.Node] = nd
		fs.topics.load(rec.Node, rec.ConfigMaps, rec.Secrets)
		for in := range referenced(nd) {
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
