package edgeagent

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/edgeset/edgeset/schema"
)

// Update locks (docs/rollouts.md, "Update locks"). Before the agent
// starts an instance of a new revision of a daemonset beside or instead of
// one that runs (an update: a new revision, a surge pair), it checks the
// running instance's lock (lockfile.go), when its template opts in:
//
//   - free: the agent takes it itself (a daemon that takes its lock with
//     an exclusive create then finds it taken) and updates; with a surge
//     pair it holds it until the old instance goes with its directory;
//   - held by the daemon, and the desired state overrides no lock that
//     old: the update is deferred. The instance keeps running, the new one
//     is not started, and the lock is reported deferred. The agent does not
//     act on that desired state even once the lock is released: it waits
//     for the controller to ask something else of the daemonset (the
//     controller gives the node's place in the rollout back and asks it to
//     keep the instance; it moves the node again once the lock is free), so
//     a released lock never switches a node behind the rollout's budget.
//     The deferral survives a restart of the agent (agent.db);
//   - held, and overridden (schema.DesiredInstance.OverrideUpdateLock at
//     or after the lock was taken): the agent breaks it and updates.
//
// Only an update waits. Removing the daemonset from the node (its
// deletion, labels, taints, a drain, the node's deletion) does not; nor
// does a restart after a crash or a failed liveness probe. A lock counts
// only while a container of its instance runs: an instance that is not
// running is updated whatever its file says, and the agent removes the
// lock when it starts an instance's containers with none of them running
// (a daemon gone after a crash or a reboot holds nothing).

// deferral is an update the agent deferred: the desired instances of the
// daemonset it was asked for, the instance it keeps, and when the lock
// that made it wait was taken.
type deferral struct {
	Asked     []schema.DesiredInstance `json:"asked"`
	Revision  string                   `json:"revision"`
	HeldSince time.Time                `json:"heldSince"`
}

// lockGate is one pass's decisions on update locks: the deferred updates,
// by daemonset.
type lockGate map[string]deferral

// keeps reports whether the gate keeps instance k: it holds a deferred
// update.
func (g lockGate) keeps(k instanceKey) bool {
	d, ok := g[k.DaemonSet]
	return ok && d.Revision == k.Revision
}

// gateUpdates decides, before a pass changes anything, which daemonsets'
// updates wait for a lock, takes the locks of those that go ahead, and
// keeps the agent's deferrals (persisted when they change).
func (a *Agent) gateUpdates(ctx context.Context, groups map[instanceKey]containerGroup) lockGate {
	gate := lockGate{}
	if a.desired == nil || a.cfg.DataDir == "" || a.cfg.Ephemeral {
		return gate
	}
	asked := a.askedByDaemonSet()
	before := maps.Clone(a.deferrals)
	for _, ds := range slices.Sorted(maps.Keys(asked)) {
		if d, ok := a.deferrals[ds]; ok && slices.Equal(d.Asked, asked[ds]) {
			gate[ds] = d // waits for the controller's answer
			continue
		}
		delete(a.deferrals, ds)
		if d, wait := a.gateOne(ctx, ds, asked[ds], groups); wait {
			gate[ds], a.deferrals[ds] = d, d
			a.event(ctx, schema.EventNormal, "UpdateDeferred", ds, fmt.Sprintf(
				"update deferred: the instance of revision %s holds its update lock (since %s)", shortRev(d.Revision), d.HeldSince.Format(time.RFC3339)))
		}
	}
	for ds := range a.deferrals {
		if _, ok := asked[ds]; !ok {
			delete(a.deferrals, ds) // no longer asked to run here: nothing waits
		}
	}
	a.persistDeferrals(before)
	return gate
}

// askedByDaemonSet groups the desired instances by daemonset, in the
// desired state's order.
func (a *Agent) askedByDaemonSet() map[string][]schema.DesiredInstance {
	out := map[string][]schema.DesiredInstance{}
	for _, in := range a.desired.Instances {
		out[in.DaemonSet] = append(out[in.DaemonSet], in)
	}
	return out
}

// gateOne decides for daemonset ds, asked to run asked: when it would
// start an instance (its template here) while an instance that opts into
// the lock runs, that instance's lock decides. It reports whether the
// update waits, and why.
func (a *Agent) gateOne(ctx context.Context, ds string, asked []schema.DesiredInstance, groups map[instanceKey]containerGroup) (deferral, bool) {
	starting := slices.ContainsFunc(asked, func(in schema.DesiredInstance) bool {
		return groups[instanceKey{DaemonSet: ds, Revision: in.Revision}] == nil && a.hasRevision(in.Revision)
	})
	if !starting {
		return deferral{}, false
	}
	for _, k := range sortedGroupKeys(groups) {
		if k.DaemonSet != ds || !groups[k].anyRunning() || !a.hasLockDir(k) {
			continue
		}
		if since, wait := a.checkLock(ctx, k, asked); wait {
			return deferral{Asked: asked, Revision: k.Revision, HeldSince: since}, true
		}
	}
	return deferral{}, false
}

// checkLock decides on the lock of running instance k before an update
// to asked: the agent takes a free lock, breaks one the desired state
// overrides, and otherwise reports that the update waits, with when the
// lock was taken. A lock that cannot be read holds, from now.
func (a *Agent) checkLock(ctx context.Context, k instanceKey, asked []schema.DesiredInstance) (time.Time, bool) {
	dir := a.lockDir(k)
	st, err := readLock(dir)
	if err != nil {
		a.log.Warn("update lock unreadable: the update waits", "daemonSet", k.DaemonSet, "err", err)
		return a.now().UTC(), true
	}
	if !st.held {
		if taken, err := takeLock(dir); taken || err != nil {
			if err != nil {
				a.log.Warn("cannot take the update lock; updating anyway", "daemonSet", k.DaemonSet, "err", err)
			}
			return time.Time{}, false
		}
		if st, err = readLock(dir); err != nil || !st.held { // taken by the daemon just now
			return time.Time{}, false
		}
	}
	if at, ok := lockOverride(asked); !ok || st.since.After(at) {
		return st.since, true
	}
	if err := removeLock(dir); err != nil {
		a.log.Warn("cannot break the overridden update lock", "daemonSet", k.DaemonSet, "err", err)
		return st.since, true
	}
	_, _ = takeLock(dir)
	a.event(ctx, schema.EventWarning, "UpdateLockOverridden", k.DaemonSet, fmt.Sprintf(
		"update lock of revision %s held since %s broken: the operator overrode it (rollout resume --force)", shortRev(k.Revision), st.since.Format(time.RFC3339)))
	return time.Time{}, false
}

// lockOverride is the latest update lock override among asked.
func lockOverride(asked []schema.DesiredInstance) (time.Time, bool) {
	var at time.Time
	for _, in := range asked {
		if in.OverrideUpdateLock == "" {
			continue
		}
		if t, err := schema.ParseLockInstant(in.OverrideUpdateLock); err == nil && t.After(at) {
			at = t
		}
	}
	return at, !at.IsZero()
}

// deferredStatus reports desired instance k, not started while its
// daemonset's update waits for d.
func (a *Agent) deferredStatus(k instanceKey, d deferral, now time.Time) schema.InstanceStatus {
	return a.report(a.tracker(k), containerGroup{}, schema.PhasePending,
		fmt.Sprintf("update deferred: the instance of revision %s holds its update lock (since %s)", shortRev(d.Revision), d.HeldSince.Format(time.RFC3339)), now)
}

// reportLocks completes a pass's statuses with the update locks: a kept
// instance of a deferred update reports the lock deferred, any other
// running instance that opts in the lock its daemon holds. It releases the
// agent's own lock of an instance whose daemonset no update concerns any
// more, and has the watcher poll the running instances' locks.
func (a *Agent) reportLocks(statuses []schema.InstanceStatus, groups map[instanceKey]containerGroup, gate lockGate) {
	if a.cfg.DataDir == "" || a.cfg.Ephemeral {
		return
	}
	watched := map[string]lockState{}
	for i := range statuses {
		st := &statuses[i]
		k := instanceKey{DaemonSet: st.DaemonSet, Revision: st.Revision}
		if d, ok := gate[k.DaemonSet]; ok && d.Revision == k.Revision {
			st.UpdateLock = &schema.UpdateLockStatus{HeldSince: d.HeldSince, Deferred: true}
		}
		if !groups[k].anyRunning() || !a.hasLockDir(k) {
			continue
		}
		dir := a.lockDir(k)
		ls, err := readLock(dir)
		if err != nil {
			a.log.Warn("update lock unreadable", "daemonSet", k.DaemonSet, "err", err)
			continue
		}
		if ls.own && !a.updating(k.DaemonSet, groups) {
			if err := removeLock(dir); err == nil {
				ls = lockState{}
			}
		}
		watched[dir] = ls
		if ls.held && st.UpdateLock == nil {
			st.UpdateLock = &schema.UpdateLockStatus{HeldSince: ls.since}
		}
	}
	a.lockWatch.set(watched)
}

// updating reports whether an update of daemonset ds is under way: the
// instances on the engine are not exactly one, the one desired.
func (a *Agent) updating(ds string, groups map[instanceKey]containerGroup) bool {
	var have []string
	for k := range groups {
		if k.DaemonSet == ds {
			have = append(have, k.Revision)
		}
	}
	asked := a.askedByDaemonSet()[ds]
	return len(have) != 1 || len(asked) != 1 || asked[0].Revision != have[0]
}

// clearLeftoverLock removes the lock of instance k before the agent
// starts one of its containers while none of them runs: whoever took it
// is gone (a crash, a reboot).
func (a *Agent) clearLeftoverLock(k instanceKey, found containerGroup) {
	if a.cfg.DataDir == "" || a.cfg.Ephemeral || found.anyRunning() || !a.hasLockDir(k) {
		return
	}
	dir := a.lockDir(k)
	if st, err := readLock(dir); err != nil || !st.held && !st.own {
		return
	}
	if err := removeLock(dir); err != nil {
		a.log.Warn("cannot remove an update lock left by a stopped instance", "daemonSet", k.DaemonSet, "err", err)
		return
	}
	a.log.Info("removed the update lock left by a stopped instance", "daemonSet", k.DaemonSet, "revision", k.Revision)
}

func (a *Agent) lockDir(k instanceKey) string {
	return updateLockDir(a.cfg.DataDir, PodUID(a.cfg.NodeName, k.DaemonSet, k.Revision))
}

func (a *Agent) hasLockDir(k instanceKey) bool {
	return hasLockDir(a.cfg.DataDir, PodUID(a.cfg.NodeName, k.DaemonSet, k.Revision))
}

// persistDeferrals saves the deferrals when they differ from before; a
// failure is logged (the deferral holds in memory).
func (a *Agent) persistDeferrals(before map[string]deferral) {
	if maps.EqualFunc(before, a.deferrals, deferralEqual) {
		return
	}
	if err := a.store.saveDeferrals(a.deferrals); err != nil {
		a.log.Warn("cannot persist deferred updates", "err", err)
	}
}

func deferralEqual(x, y deferral) bool {
	return x.Revision == y.Revision && x.HeldSince.Equal(y.HeldSince) && slices.Equal(x.Asked, y.Asked)
}

func shortRev(rev string) string {
	if len(rev) > 10 {
		return rev[:10]
	}
	return rev
}
