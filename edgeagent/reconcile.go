package edgeagent

import (
	"context"
	"maps"
	"slices"
	"sort"
	"strconv"
	"time"

	"github.com/edgeset/edgeset/schema"
)

// slot is a container's place in its instance's template: an init
// container (sidecars included) or a main container, by index.
type slot struct {
	init  bool
	index int
}

func mainSlot(i int) slot { return slot{index: i} }
func initSlot(i int) slot { return slot{init: true, index: i} }

// String is the slot's template field path, for messages.
func (s slot) String() string {
	if s.init {
		return "initContainers[" + strconv.Itoa(s.index) + "]"
	}
	return "containers[" + strconv.Itoa(s.index) + "]"
}

// containerGroup is the containers of one instance found on the engine, by
// their template slot.
type containerGroup map[slot]ContainerState

// pass carries what one reconcile pass shares across instances.
type pass struct {
	now      time.Time
	failures map[string]livenessFailure // liveness failures reported by probes
	active   map[probeKey]bool          // probe workers wanted after this pass
}

// reconcile runs one level-triggered pass over the engine and returns how
// long until the next pass is due.
func (a *Agent) reconcile(ctx context.Context) time.Duration {
	now := a.now()
	list, err := a.rt.List(ctx, a.cfg.NodeName)
	if err != nil {
		if ctx.Err() == nil {
			a.log.Warn("list containers failed; retrying at next pass", "err", err)
		}
		return a.cfg.ResyncInterval
	}
	a.runs.observe(list)
	groups, surplus := inventory(list)
	desired := a.desiredInstances()
	gate := a.gateUpdates(ctx, groups)
	keep := a.removeLeftovers(ctx, desired, groups, surplus, gate)
	p := &pass{now: now, failures: a.probes.takeFailures(), active: map[probeKey]bool{}}
	statuses := make([]schema.InstanceStatus, 0, len(desired)+len(keep))
	self := false
	for _, k := range desired {
		if k.DaemonSet == schema.AgentDaemonSet { // never a container; validation allows no surge pair
			self = true
			statuses = append(statuses, a.syncSelf(ctx, p, k))
			continue
		}
		if d, deferred := gate[k.DaemonSet]; deferred && groups[k] == nil {
			statuses = append(statuses, a.deferredStatus(k, d, now))
			continue
		}
		statuses = append(statuses, a.syncInstance(ctx, p, k, groups[k], false))
	}
	if !self {
		a.idleSelf()
	}
	for _, k := range keep {
		statuses = append(statuses, a.syncInstance(ctx, p, k, groups[k], true))
	}
	a.reportLocks(statuses, groups, gate)
	a.probes.retain(p.active)
	a.hooks.retain(liveContainers(statuses))
	a.forget(append(desired, keep...))
	a.persistRestarts()
	a.sweepPods(append(desired, keep...))
	a.syncPrefetch()
	a.finishPass(ctx, statuses)
	a.syncKubeletLogs(list)
	return a.untilNextPass(now)
}

// removeLeftovers removes surplus containers and instances no longer
// desired, and returns the undesired instances kept (see planLeftovers;
// the gate keeps those whose update waits for their lock).
func (a *Agent) removeLeftovers(ctx context.Context, desired []instanceKey, groups map[instanceKey]containerGroup, surplus []ContainerState, gate lockGate) []instanceKey {
	if a.desired == nil {
		// Never told anything (fresh or wiped data dir): unknown is not
		// empty, so nothing is removed until a desired state arrives.
		return sortedGroupKeys(groups)
	}
	for _, c := range surplus {
		a.removeContainer(ctx, nil, c)
	}
	keep, remove := planLeftovers(desired, a.hasRevision, groups)
	for _, k := range remove {
		if gate.keeps(k) {
			keep = append(keep, k)
			sortKeys(keep)
			continue
		}
		a.log.Info("removing instance no longer desired", "daemonSet", k.DaemonSet, "revision", k.Revision)
		a.removeGroup(ctx, groups[k])
	}
	return keep
}

// liveContainers is the set of containers the statuses report.
func liveContainers(statuses []schema.InstanceStatus) map[string]bool {
	live := map[string]bool{}
	for _, st := range statuses {
		for _, id := range st.ContainerIDs {
			live[id] = true
		}
	}
	return live
}

func (a *Agent) desiredInstances() []instanceKey {
	if a.desired == nil {
		return nil
	}
	return slices.Clone(a.desired.Instances)
}

func (a *Agent) hasRevision(hash string) bool {
	_, ok := a.revisions[hash]
	return ok
}

// inventory groups managed containers by instance and template slot
// (LabelIndex for a main container, LabelInitIndex for an init container).
// A container with malformed labels, or a duplicate of another in the same
// slot, is surplus; of duplicates the oldest running one is kept.
func inventory(list []ContainerState) (map[instanceKey]containerGroup, []ContainerState) {
	groups := map[instanceKey]containerGroup{}
	var surplus []ContainerState
	for _, c := range list {
		key, sl, ok := containerIdentity(c)
		if !ok {
			surplus = append(surplus, c)
			continue
		}
		g := groups[key]
		if g == nil {
			g = containerGroup{}
			groups[key] = g
		}
		if prev, dup := g[sl]; dup {
			keep, drop := preferContainer(prev, c)
			g[sl] = keep
			surplus = append(surplus, drop)
			continue
		}
		g[sl] = c
	}
	return groups, surplus
}

func containerIdentity(c ContainerState) (instanceKey, slot, bool) {
	ds, rev := c.Labels[LabelDaemonSet], c.Labels[LabelRevision]
	sl, ok := labelSlot(c.Labels)
	if ds == "" || rev == "" || !ok {
		return instanceKey{}, slot{}, false
	}
	return instanceKey{DaemonSet: ds, Revision: rev}, sl, true
}

// labelSlot reads a container's slot from exactly one of LabelIndex and
// LabelInitIndex.
func labelSlot(labels map[string]string) (slot, bool) {
	main, hasMain := labels[LabelIndex]
	init, hasInit := labels[LabelInitIndex]
	if hasMain == hasInit {
		return slot{}, false
	}
	v, sl := main, mainSlot(0)
	if hasInit {
		v, sl = init, initSlot(0)
	}
	idx, err := strconv.Atoi(v)
	if err != nil || idx < 0 {
		return slot{}, false
	}
	sl.index = idx
	return sl, true
}

// preferContainer orders two duplicates: a running one before a stopped
// one, then the older, then the smaller id.
func preferContainer(x, y ContainerState) (keep, drop ContainerState) {
	switch {
	case x.Running != y.Running:
		if x.Running {
			return x, y
		}
		return y, x
	case !x.Created.Equal(y.Created):
		if x.Created.Before(y.Created) {
			return x, y
		}
		return y, x
	case x.ID <= y.ID:
		return x, y
	default:
		return y, x
	}
}

// planLeftovers decides the fate of instances on the engine that are not
// desired. They are removed, except that while a daemonset's desired
// revision has not arrived (and none of its desired revisions is
// available) one of its current instances keeps running, preferring a
// running one. Both results are sorted.
func planLeftovers(desired []instanceKey, has func(hash string) bool, groups map[instanceKey]containerGroup) (keep, remove []instanceKey) {
	isDesired := map[instanceKey]bool{}
	waiting, served := map[string]bool{}, map[string]bool{}
	for _, k := range desired {
		isDesired[k] = true
		if has(k.Revision) {
			served[k.DaemonSet] = true
		} else {
			waiting[k.DaemonSet] = true
		}
	}
	kept := map[string]instanceKey{}
	for _, k := range sortedGroupKeys(groups) {
		switch {
		case isDesired[k]:
		case !waiting[k.DaemonSet] || served[k.DaemonSet]:
			remove = append(remove, k)
		default:
			prev, ok := kept[k.DaemonSet]
			if !ok || !groups[prev].anyRunning() && groups[k].anyRunning() {
				if ok {
					remove = append(remove, prev)
				}
				kept[k.DaemonSet] = k
			} else {
				remove = append(remove, k)
			}
		}
	}
	for _, k := range kept {
		keep = append(keep, k)
	}
	sortKeys(keep)
	sortKeys(remove)
	return keep, remove
}

func sortedGroupKeys(groups map[instanceKey]containerGroup) []instanceKey {
	keys := make([]instanceKey, 0, len(groups))
	for k := range groups {
		keys = append(keys, k)
	}
	sortKeys(keys)
	return keys
}

func sortKeys(keys []instanceKey) {
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].DaemonSet != keys[j].DaemonSet {
			return keys[i].DaemonSet < keys[j].DaemonSet
		}
		return keys[i].Revision < keys[j].Revision
	})
}

func (g containerGroup) anyRunning() bool {
	for _, c := range g {
		if c.Running {
			return true
		}
	}
	return false
}

// stopOrder returns the group's slots in the order Kubernetes stops a
// pod's containers: main containers highest index first (followers before
// the owner of their network namespace), then init containers highest
// index first (sidecars in reverse start order).
func (g containerGroup) stopOrder() []slot {
	slots := make([]slot, 0, len(g))
	for sl := range g {
		slots = append(slots, sl)
	}
	sort.Slice(slots, func(i, j int) bool {
		if slots[i].init != slots[j].init {
			return !slots[i].init
		}
		return slots[i].index > slots[j].index
	})
	return slots
}

// hasMain reports whether any main container of the instance exists.
func (g containerGroup) hasMain() bool {
	for sl := range g {
		if !sl.init {
			return true
		}
	}
	return false
}

// removeGroup stops and removes every container of an instance, in
// stopOrder.
func (a *Agent) removeGroup(ctx context.Context, g containerGroup) {
	for _, sl := range g.stopOrder() {
		a.removeContainer(ctx, g, g[sl])
	}
}

// removeContainer stops c (see stopContainer), then removes it. g is c's
// instance, for the address a preStop httpGet hook reaches.
func (a *Agent) removeContainer(ctx context.Context, g containerGroup, c ContainerState) {
	if c.Running {
		if err := a.stopContainer(ctx, g, c, labelGrace(c.Labels)); err != nil {
			a.log.Warn("stop container failed; removing anyway", "container", c.Name, "err", err)
		}
	}
	if err := a.rt.Remove(ctx, c.ID); err != nil {
		a.log.Warn("remove container failed", "container", c.Name, "err", err)
	}
}

func labelGrace(labels map[string]string) time.Duration {
	s, err := strconv.Atoi(labels[LabelStopGrace])
	if err != nil || s < 0 {
		return DefaultStopGrace
	}
	return time.Duration(s) * time.Second
}

// forget drops trackers and cached templates of instances no longer known.
func (a *Agent) forget(live []instanceKey) {
	liveKeys := map[instanceKey]bool{}
	liveRevs := map[string]bool{}
	for _, k := range live {
		liveKeys[k] = true
		liveRevs[k.Revision] = true
	}
	for _, rev := range a.prefetchRevisions() {
		liveRevs[rev] = true
	}
	for k := range a.instances {
		if !liveKeys[k] {
			delete(a.instances, k)
		}
	}
	for h := range a.revisions {
		if !liveRevs[h] {
			delete(a.revisions, h)
		}
	}
}

// persistRestarts saves the restart counts of the instances tracked when
// they differ from what was last saved; a failure is retried at the next
// pass.
func (a *Agent) persistRestarts() {
	now := make(map[string]int32, len(a.instances))
	for k, inst := range a.instances {
		if inst.restarts > 0 {
			now[restartsKey(k)] = inst.restarts
		}
	}
	if maps.Equal(now, a.restarts) {
		return
	}
	if err := a.store.saveRestarts(now); err != nil {
		a.log.Warn("cannot persist restart counts; will retry", "err", err)
		return
	}
	a.restarts = now
}

// finishPass records the applied generation and publishes the observed
// state if it changed.
func (a *Agent) finishPass(ctx context.Context, statuses []schema.InstanceStatus) {
	if a.desired != nil && a.applied != a.desired.Generation {
		if err := a.store.saveApplied(a.desired.Generation); err != nil {
			a.log.Warn("cannot persist applied generation", "err", err)
		}
		a.applied = a.desired.Generation
	}
	sort.Slice(statuses, func(i, j int) bool {
		if statuses[i].DaemonSet != statuses[j].DaemonSet {
			return statuses[i].DaemonSet < statuses[j].DaemonSet
		}
		return statuses[i].Revision < statuses[j].Revision
	})
	a.setObserved(schema.ObservedState{
		SchemaVersion: schema.WireVersion, Node: a.cfg.NodeName, ObservedGeneration: a.applied, Instances: statuses,
	})
	if err := a.publishObserved(ctx, false); err != nil {
		a.log.Warn("observed state not published; will retry", "err", err)
	}
}

// untilNextPass returns the time to the earliest backoff expiry, bounded by
// the resync interval.
func (a *Agent) untilNextPass(now time.Time) time.Duration {
	next := a.cfg.ResyncInterval
	for _, inst := range a.instances {
		for _, t := range []time.Time{inst.crash.until, inst.pull.until} {
			if d := t.Sub(now); d > 0 && d < next {
				next = d
			}
		}
	}
	return next
}
