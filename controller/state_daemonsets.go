package controller

import (
	"github.com/edgeset/edgeset/controller/decider"
	"github.com/edgeset/edgeset/controller/rollout"
	"github.com/edgeset/edgeset/controller/store"
)

// The daemonset side of fleetState: entries, their rollout states and
// statuses. Every write marks the daemonset for the next pass.

// dsView is a daemonset entry with its last computed status, as copies.
type dsView struct {
	entry  dsEntry
	status dsStatus
}

// entry returns a copy of daemonset key's entry.
func (fs *fleetState) entry(key string) (dsEntry, bool) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	e, ok := fs.daemonsets[key]
	if !ok {
		return dsEntry{}, false
	}
	return *e, true
}

// view returns a copy of daemonset key's entry and status.
func (fs *fleetState) view(key string) (dsView, bool) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	e, ok := fs.daemonsets[key]
	if !ok {
		return dsView{}, false
	}
	return dsView{entry: *e, status: fs.status[key]}, true
}

// views returns a copy of every daemonset entry (orphans too) with its
// status, sorted by key.
func (fs *fleetState) views() []dsView {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	out := make([]dsView, 0, len(fs.daemonsets))
	for _, key := range sortedKeys(fs.daemonsets) {
		out = append(out, dsView{entry: *fs.daemonsets[key], status: fs.status[key]})
	}
	return out
}

// lockEntries returns the update lock entries of every daemonset's
// rollout that has some, by key.
func (fs *fleetState) lockEntries() map[string]lockEntries {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	out := map[string]lockEntries{}
	for key, e := range fs.daemonsets {
		if e.locks.stale != nil || e.locks.overrides != nil {
			out[key] = e.locks
		}
	}
	return out
}

// managedKeys returns the keys of the daemonsets that are not orphaned,
// sorted.
func (fs *fleetState) managedKeys() []string {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	var keys []string
	for _, key := range sortedKeys(fs.daemonsets) {
		if !fs.daemonsets[key].orphan() {
			keys = append(keys, key)
		}
	}
	return keys
}

// daemonSetKeys returns the key of every entry, orphans too, sorted.
func (fs *fleetState) daemonSetKeys() []string {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	return sortedKeys(fs.daemonsets)
}

// deciderInput is daemonset key as the decider takes it; ok is false when
// there is no such entry (any more).
func (fs *fleetState) deciderInput(key string) (decider.DaemonSet, bool) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	e, ok := fs.daemonsets[key]
	if !ok {
		return decider.DaemonSet{}, false
	}
	strategy := e.strategy
	strategy.UseSiteLabel(fs.siteLabel)
	return decider.DaemonSet{
		Key: key, Policy: e.policy, Revision: e.rec.CurrentRevision,
		MinReadySeconds: e.rec.DaemonSet.Spec.MinReadySeconds,
		Strategy:        strategy, Rollout: e.rollout, Orphan: e.orphan(),
	}, true
}

// putEntry makes e daemonset key's entry, keeping the rollout state of the
// entry it replaces once that rollout has a target (a stored daemonset
// record carries no rollout state of its own), and marks it.
func (fs *fleetState) putEntry(e *dsEntry) {
	key := e.rec.Key()
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if old, ok := fs.daemonsets[key]; ok && old.rollout.Target != "" {
		e.rollout, e.rolloutWhole, e.locks = old.rollout, old.rolloutWhole, old.locks
	}
	fs.daemonsets[key] = e
	fs.markDaemonSetLocked(key)
}

// hasRollout reports whether the working state holds a rollout state of
// daemonset key (which putEntry keeps).
func (fs *fleetState) hasRollout(key string) bool {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	e, ok := fs.daemonsets[key]
	return ok && e.rollout.Target != ""
}

// setRecord replaces the stored record of daemonset key (its orphaning
// deletion) and marks it; false when there is no such entry.
func (fs *fleetState) setRecord(key string, rec store.DaemonSetRecord) bool {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	e, ok := fs.daemonsets[key]
	if !ok {
		return false
	}
	next := *e
	next.rec = rec
	fs.daemonsets[key] = &next
	fs.markDaemonSetLocked(key)
	return true
}

// deleteEntry drops daemonset key and marks it.
func (fs *fleetState) deleteEntry(key string) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	delete(fs.daemonsets, key)
	fs.markDaemonSetLocked(key)
}

// setRollout makes st daemonset key's rollout state (an operator's
// action) and marks it; false when there is no such entry.
func (fs *fleetState) setRollout(key string, st rollout.State) bool {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if !fs.putRolloutLocked(key, st) {
		return false
	}
	fs.markDaemonSetLocked(key)
	return true
}

// commitRollouts keeps the rollout states a stored decision stepped to,
// by daemonset; a daemonset deleted meanwhile is skipped. Nothing is
// marked: the decider stepped them and holds them already, and marking
// would make the next pass compare states whose maps grow with the fleet.
// Nor are they cloned (a copy per pass of maps as large as the fleet):
// their maps stay the decider's trackers', changed in place by the next
// pass, which is why dsEntry.rollout's maps are read only under passMu.
func (fs *fleetState) commitRollouts(states map[string]rollout.State) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	for key, st := range states {
		fs.putRolloutLocked(key, st)
	}
}

// putRolloutLocked replaces daemonset key's entry by one with rollout
// state st, just stored; false when there is no such entry.
func (fs *fleetState) putRolloutLocked(key string, st rollout.State) bool {
	e, ok := fs.daemonsets[key]
	if !ok {
		return false
	}
	next := *e
	next.rollout, next.rolloutWhole = st, false // a whole record's first write replaced it
	next.locks = lockEntriesOf(st)
	fs.daemonsets[key] = &next
	return true
}

// wholeRollouts returns those of keys whose stored rollout record is a
// whole state (dsEntry.rolloutWhole): their next write replaces it.
func (fs *fleetState) wholeRollouts(keys []string) map[string]bool {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	out := map[string]bool{}
	for _, key := range keys {
		if e, ok := fs.daemonsets[key]; ok && e.rolloutWhole {
			out[key] = true
		}
	}
	return out
}

// setStatus replaces every daemonset's status. Statuses are derived from
// a decision, not decided on, so nothing is marked.
func (fs *fleetState) setStatus(status map[string]dsStatus) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	fs.status = status
}

// currentRevisions returns the current revision of each named daemonset
// that has an entry.
func (fs *fleetState) currentRevisions(keys []string) map[string]string {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	out := make(map[string]string, len(keys))
	for _, key := range keys {
		if e, ok := fs.daemonsets[key]; ok {
			out[key] = e.rec.CurrentRevision
		}
	}
	return out
}

// revisionsInUse returns the revisions of daemonset key that must outlive
// a history trim: current, one some node is asked to run, the rollout's
// stable and target revisions, and the one an automatic rollback rejected
// (a rollout retry rolls it out again).
func (fs *fleetState) revisionsInUse(key, current string) map[string]bool {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	inUse := map[string]bool{current: true}
	for _, d := range fs.current {
		for _, in := range d.Instances {
			if in.DaemonSet == key {
				inUse[in.Revision] = true
			}
		}
	}
	if e, ok := fs.daemonsets[key]; ok {
		inUse[e.rollout.Stable], inUse[e.rollout.Target] = true, true
		if r := e.rec.Rejected; r != nil {
			inUse[r.Hash] = true
		}
	}
	return inUse
}

// nodesPerRevision counts, per revision of daemonset key, the nodes asked
// to run it.
func (fs *fleetState) nodesPerRevision(key string) map[string]int {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	n := map[string]int{}
	for _, d := range fs.current {
		for _, in := range d.Instances {
			if in.DaemonSet == key {
				n[in.Revision]++
			}
		}
	}
	return n
}
