package controller

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"time"

	"github.com/edgeset/edgeset/controller/api"
	"github.com/edgeset/edgeset/controller/rollout"
	"github.com/edgeset/edgeset/controller/store"
	"github.com/edgeset/edgeset/schema"
)

// Device-side update locks, as the API shows and overrides them. The
// rollout decides what a lock does (controller/rollout/locks.go); here an
// operator's `rollout resume --force` becomes a rollout state, and the
// state's lock entries become what reads show.

// ReasonUpdateLocksOverridden is the event of `rollout resume --force`.
const ReasonUpdateLocksOverridden = "RolloutUpdateLocksOverridden"

// ForceRollout resumes daemonset key's rollout, as `rollout resume` does,
// and overrides the update locks its rollout reports stale: every node's,
// or node's alone when node is not empty (an error, changing nothing,
// when node has no stale lock). The nodes then move under the budget as if
// their locks were free, and their agents break those locks. Durable
// before it returns.
func (c *Controller) ForceRollout(ctx context.Context, key, node string) (api.DaemonSet, error) {
	c.passMu.Lock()
	err := c.forceRolloutLocked(key, node)
	c.passMu.Unlock()
	if err != nil {
		return api.DaemonSet{}, err
	}
	c.wake()
	return c.GetDaemonSet(ctx, key)
}

func (c *Controller) forceRolloutLocked(key, node string) error {
	e, err := c.entry(key)
	if err != nil {
		return err
	}
	st := e.rollout
	if st.Target == "" {
		st.Target = e.rec.CurrentRevision
	}
	var only []string
	if node != "" {
		only = []string{node}
	}
	st, overridden := st.OverrideStaleLocks(only...)
	if node != "" && len(overridden) == 0 {
		return fmt.Errorf("%w: node %q holds no stale update lock of daemonset %s (a lock is stale once held longer than spec.rollout.updateLockStaleAfterSeconds: %s; `edgesetctl rollout status` lists them)",
			api.ErrInvalid, node, key, staleLimit(e.strategy))
	}
	st.OperatorPaused, st.Paused, st.PauseReason, st.Failed = false, false, "", nil
	err = c.store.Update(false, func(tx *store.Txn) error { return putRolloutTxn(tx, key, st, nil, true) })
	if err != nil {
		return err
	}
	c.state.setRollout(key, st)
	c.events.add(dsObject(key), schema.EventNormal, "RolloutResume", "rollout resume by the operator")
	if len(overridden) > 0 {
		c.events.add(dsObject(key), schema.EventWarning, ReasonUpdateLocksOverridden,
			"stale update locks overridden by the operator on "+lockList(st.LockOverrides, overridden))
	}
	return nil
}

func staleLimit(s rollout.Strategy) string {
	if s.UpdateLockStaleAfter <= 0 {
		return "never"
	}
	return s.UpdateLockStaleAfter.String()
}

// lockList names nodes with when their lock was taken.
func lockList(since map[string]time.Time, nodes []string) string {
	parts := make([]string, len(nodes))
	for i, n := range nodes {
		parts[i] = fmt.Sprintf("node %s (held since %s)", n, since[n].UTC().Format(time.RFC3339))
	}
	return strings.Join(parts, ", ")
}

// lockEntries are a rollout state's update lock entries, copied when the
// state is kept in a daemonset's entry: the state's own maps belong to
// the decider, which changes them in place during a pass, while API reads
// run outside it. Never modified once made.
type lockEntries struct {
	stale, overrides map[string]time.Time
}

func lockEntriesOf(st rollout.State) lockEntries {
	var l lockEntries
	if len(st.StaleLocks) > 0 {
		l.stale = maps.Clone(st.StaleLocks)
	}
	if len(st.LockOverrides) > 0 {
		l.overrides = maps.Clone(st.LockOverrides)
	}
	return l
}

// view is the API form of the lock node reports, nil for none.
func (l lockEntries) view(node string, reported *schema.UpdateLockStatus) *api.UpdateLock {
	if reported == nil {
		return nil
	}
	since := reported.HeldSince
	stale, ok := l.stale[node]
	overridden, over := l.overrides[node]
	return &api.UpdateLock{HeldSince: since, Deferred: reported.Deferred,
		Stale: ok && stale.Equal(since), Overridden: over && overridden.Equal(since)}
}

// reportedLock is the update lock a node reports for daemonset key, on
// any of its instances of it (of two, the one taken first); nil for none.
func reportedLock(obs schema.ObservedState, key string) *schema.UpdateLockStatus {
	var out *schema.UpdateLockStatus
	for i := range obs.Instances {
		in := &obs.Instances[i]
		if in.DaemonSet == key && in.UpdateLock != nil && (out == nil || in.UpdateLock.HeldSince.Before(out.HeldSince)) {
			out = in.UpdateLock
		}
	}
	return out
}
