package edgeagent

import (
	"context"
	"slices"
	"sort"
	"strconv"
	"time"

	"github.com/edgeset/edgeset/schema"
)

// containerGroup is the containers of one instance found on the engine, by
// their template index.
type containerGroup map[int]ContainerState

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
	groups, surplus := inventory(list)
	desired := a.desiredInstances()
	keep := a.removeLeftovers(ctx, desired, groups, surplus)
	p := &pass{now: now, failures: a.probes.takeFailures(), active: map[probeKey]bool{}}
	statuses := make([]schema.InstanceStatus, 0, len(desired)+len(keep))
	for _, k := range desired {
		statuses = append(statuses, a.syncInstance(ctx, p, k, groups[k], false))
	}
	for _, k := range keep {
		statuses = append(statuses, a.syncInstance(ctx, p, k, groups[k], true))
	}
	a.probes.retain(p.active)
	a.forget(append(desired, keep...))
	a.sweepPods(append(desired, keep...))
	a.finishPass(ctx, statuses)
	return a.untilNextPass(now)
}

// removeLeftovers removes surplus containers and instances no longer
// desired, and returns the undesired instances kept (see planLeftovers).
func (a *Agent) removeLeftovers(ctx context.Context, desired []instanceKey, groups map[instanceKey]containerGroup, surplus []ContainerState) []instanceKey {
	if a.desired == nil {
		// Never told anything (fresh or wiped data dir): unknown is not
		// empty, so nothing is removed until a desired state arrives.
		return sortedGroupKeys(groups)
	}
	for _, c := range surplus {
		a.removeContainer(ctx, c)
	}
	keep, remove := planLeftovers(desired, a.hasRevision, groups)
	for _, k := range remove {
		a.log.Info("removing instance no longer desired", "daemonSet", k.DaemonSet, "revision", k.Revision)
		a.removeGroup(ctx, groups[k])
	}
	return keep
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

// inventory groups managed containers by instance and template index. A
// container with malformed labels, or a duplicate of another at the same
// index, is surplus; of duplicates the oldest running one is kept.
func inventory(list []ContainerState) (map[instanceKey]containerGroup, []ContainerState) {
	groups := map[instanceKey]containerGroup{}
	var surplus []ContainerState
	for _, c := range list {
		key, idx, ok := containerIdentity(c)
		if !ok {
			surplus = append(surplus, c)
			continue
		}
		g := groups[key]
		if g == nil {
			g = containerGroup{}
			groups[key] = g
		}
		if prev, dup := g[idx]; dup {
			keep, drop := preferContainer(prev, c)
			g[idx] = keep
			surplus = append(surplus, drop)
			continue
		}
		g[idx] = c
	}
	return groups, surplus
}

func containerIdentity(c ContainerState) (instanceKey, int, bool) {
	ds, rev := c.Labels[LabelDaemonSet], c.Labels[LabelRevision]
	idx, err := strconv.Atoi(c.Labels[LabelIndex])
	if ds == "" || rev == "" || err != nil || idx < 0 {
		return instanceKey{}, 0, false
	}
	return instanceKey{DaemonSet: ds, Revision: rev}, idx, true
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

// indexes returns the group's template indexes, highest first, so followers
// stop before the container owning their network namespace.
func (g containerGroup) indexes() []int {
	idx := make([]int, 0, len(g))
	for i := range g {
		idx = append(idx, i)
	}
	sort.Sort(sort.Reverse(sort.IntSlice(idx)))
	return idx
}

// removeGroup stops and removes every container of an instance.
func (a *Agent) removeGroup(ctx context.Context, g containerGroup) {
	for _, i := range g.indexes() {
		a.removeContainer(ctx, g[i])
	}
}

// removeContainer stops c with the grace recorded on it, then removes it.
func (a *Agent) removeContainer(ctx context.Context, c ContainerState) {
	if c.Running {
		if err := a.rt.Stop(ctx, c.ID, labelGrace(c.Labels)); err != nil {
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
