package rollout

import (
	"fmt"
	"slices"
	"time"
)

// Device-side update locks. A node's agent reports, on the instance that
// holds it, the update lock a daemon took (Instance.LockedSince), and
// whether it deferred a switch because of it (Instance.LockDeferred). The
// rollout reads a lock on an instance of a revision other than the target
// (one the node would leave):
//
//   - A node on an older revision whose lock is held is PhaseHeldByLock:
//     never moved, so it spends no budget, until the lock is released (or
//     overridden). The others are moved in its place.
//   - A node moved before its lock was seen whose agent deferred the
//     switch gives its place back: it is asked to keep the instance that
//     holds the lock (its entries of this rollout dropped, as if it had
//     never been moved) and is PhaseHeldByLock. Its agent does not act on
//     the deferred request even once the lock is released: it waits for
//     this answer, so a released lock never switches a node behind the
//     budget's back.
//   - A lock held for UpdateLockStaleAfter is stale: State.StaleLocks
//     records it and ReasonUpdateLockStale says so, once per lock.
//   - An operator overrides a stale lock by copying its State.StaleLocks
//     entry to State.LockOverrides (OverrideStaleLocks): the node then
//     moves under the budget as if it were free, and the controller tells
//     its agent to break a lock taken at or before that instant.
//
// Both entries are dropped when the node reports another lock, or none.

// nodeLock is the update lock a node reports on an instance it would
// leave for the target.
type nodeLock struct {
	since    time.Time
	deferred bool
	revision string
}

// reportedLock returns the lock v reports on an instance of a revision
// other than the target (of two, the one taken first), overridden or
// not.
func (p *pass) reportedLock(v *nodeView) (nodeLock, bool) {
	var l nodeLock
	for i := range v.Observed {
		in := &v.Observed[i]
		if in.Revision == p.st.Target || in.LockedSince.IsZero() {
			continue
		}
		if l.since.IsZero() || in.LockedSince.Before(l.since) {
			l = nodeLock{since: in.LockedSince, deferred: in.LockDeferred, revision: in.Revision}
		}
	}
	return l, !l.since.IsZero()
}

// heldLock returns the lock v reports, when an operator has not
// overridden it.
func (p *pass) heldLock(v *nodeView) (nodeLock, bool) {
	l, ok := p.reportedLock(v)
	if !ok || p.overridden(v.Name, l.since) {
		return nodeLock{}, false
	}
	return l, true
}

func (p *pass) overridden(node string, since time.Time) bool {
	at, ok := p.st.LockOverrides[node]
	return ok && at.Equal(since)
}

// judgeLock keeps node v's StaleLocks and LockOverrides entries to the
// lock it reports: they go when it reports another lock or none; a lock
// held for UpdateLockStaleAfter becomes stale, with an event, and the pass
// asks for a requeue when one will. An offline node keeps its entries.
func (p *pass) judgeLock(v *nodeView) {
	if v.offline {
		return
	}
	l, ok := p.reportedLock(v)
	if at, had := p.st.StaleLocks[v.Name]; had && (!ok || !at.Equal(l.since)) {
		delete(p.st.StaleLocks, v.Name)
	}
	if at, had := p.st.LockOverrides[v.Name]; had && (!ok || !at.Equal(l.since)) {
		delete(p.st.LockOverrides, v.Name)
	}
	if !ok || p.s.UpdateLockStaleAfter <= 0 {
		return
	}
	if stale := l.since.Add(p.s.UpdateLockStaleAfter); p.now.Before(stale) {
		p.requeue(stale)
		return
	}
	if _, seen := p.st.StaleLocks[v.Name]; seen {
		return
	}
	p.st.StaleLocks = putTime(p.st.StaleLocks, v.Name, l.since)
	p.events = append(p.events, Event{Reason: ReasonUpdateLockStale, Node: v.Name, Warning: true,
		Message: fmt.Sprintf("update lock held since %s, longer than updateLockStaleAfterSeconds (%s): `rollout resume --force` overrides it",
			l.since.UTC().Format(time.RFC3339), p.s.UpdateLockStaleAfter)})
}

// yieldDeferred gives back the place of a node whose agent deferred its
// switch because of a held lock: it is asked to keep the instance that
// holds the lock, and its entries of the rollout are dropped. It reports
// whether it did.
func (p *pass) yieldDeferred(v *nodeView) bool {
	l, held := p.heldLock(v)
	if !held || !l.deferred || slices.Equal(v.Assigned, []string{l.revision}) {
		return false
	}
	p.out[v.Name] = []string{l.revision}
	p.st.dropProgress(v.Name)
	delete(p.st.Failed, v.Name)
	delete(p.st.Away, v.Name)
	v.heldByLock = true
	return true
}

// staleLock reports whether node's lock is recorded stale.
func (p *pass) staleLock(node string) bool {
	_, ok := p.st.StaleLocks[node]
	return ok
}

// OverrideStaleLocks returns st with the stale locks of nodes (every node
// with one when nodes is empty) overridden, and the nodes it overrode,
// sorted. A node without a stale lock is not overridden.
func (st State) OverrideStaleLocks(nodes ...string) (State, []string) {
	st = cloneState(st)
	var done []string
	for node, since := range st.StaleLocks {
		if len(nodes) > 0 && !slices.Contains(nodes, node) {
			continue
		}
		st.LockOverrides = putTime(st.LockOverrides, node, since)
		done = append(done, node)
	}
	slices.Sort(done)
	return st, done
}

func putTime(m map[string]time.Time, node string, t time.Time) map[string]time.Time {
	if m == nil {
		m = map[string]time.Time{}
	}
	m[node] = t
	return m
}
