package controller

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgeset/edgeset/controller/api"
	"github.com/edgeset/edgeset/controller/rollout"
	"github.com/edgeset/edgeset/internal/checkfor"
	"github.com/edgeset/edgeset/schema"
)

// lockAgent is a fake agent of one daemonset that keeps the update lock
// protocol (docs/protocol.md): it runs what it is asked, unless that
// replaces the instance it runs while the daemon holds the lock (and the
// controller did not override a lock that old); it then keeps that
// instance, reports the lock deferred, and does not act on the request
// until it is asked something else.
type lockAgent struct {
	clock func() time.Time
	mu    sync.Mutex
	// running is the revision it runs; since when the daemon took its
	// lock (zero: free); takeOnUpdate makes the daemon take it the moment
	// an update arrives (the race the protocol answers).
	running      string
	since        time.Time
	takeOnUpdate bool
	// deferred is the revision it deferred, deferredSince the lock that
	// made it; gen the generation of the last desired state.
	deferred      string
	deferredSince time.Time
	gen           uint64
}

func (a *lockAgent) behave(d schema.DesiredState) schema.ObservedState {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.gen = d.Generation
	if len(d.Instances) != 1 {
		return a.observedLocked("")
	}
	in := d.Instances[0]
	switch {
	case a.running == "" || in.Revision == a.running:
		a.running, a.deferred = in.Revision, ""
	case a.deferred == in.Revision:
		// waits for the controller's answer
	default:
		a.deferred = ""
		if a.takeOnUpdate && a.since.IsZero() {
			a.since = a.clock()
		}
		if a.heldAgainst(in) {
			a.deferred, a.deferredSince = in.Revision, a.since
		} else {
			a.running, a.since = in.Revision, time.Time{} // the lock goes with the instance
		}
	}
	return a.observedLocked(in.Revision)
}

// heldAgainst reports whether the lock holds against the desired
// instance in.
func (a *lockAgent) heldAgainst(in schema.DesiredInstance) bool {
	if a.since.IsZero() {
		return false
	}
	if in.OverrideUpdateLock == "" {
		return true
	}
	at, err := schema.ParseLockInstant(in.OverrideUpdateLock)
	return err != nil || a.since.After(at)
}

func (a *lockAgent) observedLocked(desired string) schema.ObservedState {
	ready := a.clock().Add(-time.Hour)
	run := schema.InstanceStatus{DaemonSet: exporter, Revision: a.running, Phase: schema.PhaseRunning, Ready: true, ReadySince: &ready}
	switch {
	case a.deferred != "":
		run.UpdateLock = &schema.UpdateLockStatus{HeldSince: a.deferredSince, Deferred: true}
	case !a.since.IsZero():
		run.UpdateLock = &schema.UpdateLockStatus{HeldSince: a.since}
	}
	obs := schema.ObservedState{ObservedGeneration: a.gen, Instances: []schema.InstanceStatus{run}}
	if desired != "" && desired != a.running {
		obs.Instances = append(obs.Instances, schema.InstanceStatus{DaemonSet: exporter, Revision: desired, Phase: schema.PhasePending,
			Message: "update deferred: held by its update lock"})
	}
	return obs
}

// setLock makes the daemon take (at since) or release (zero) its lock,
// and reports it.
func (a *lockAgent) setLock(n *fakeNode, since time.Time) {
	a.mu.Lock()
	a.since = since
	obs := a.observedLocked("")
	a.mu.Unlock()
	n.report(obs)
}

func (a *lockAgent) runs() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.running
}

// lockedExporter is the exporter with the update lock, stale after ten
// minutes, maxUnavailable 1.
func lockedExporter(image string) string {
	return fmt.Sprintf(`apiVersion: edgeset.io/v1
kind: DaemonSet
metadata: {name: exporter, namespace: monitoring}
spec:
  selector: {matchLabels: {app: exporter}}
  updateStrategy: %s
  rollout: {updateLockStaleAfterSeconds: 600}
  template:
    metadata:
      labels: {app: exporter}
      annotations: {edgeset.io/update-lock: "true"}
    spec:
      containers:
      - {name: exporter, image: "%s"}
`, rollingOne, image)
}

// TestUpdateLockRollout drives a rollout through the embedded broker past
// nodes whose daemons hold their update lock: a node known to hold it is
// passed over, one whose agent deferred gives its place back, both are
// reported held and then stale (with events), `rollout resume --force`
// overrides one node's stale lock through the API (its agent is told
// which lock it may break), and the other is updated once its daemon
// releases the lock.
func TestUpdateLockRollout(t *testing.T) {
	clock := &testClock{t: time.Date(2026, 2, 1, 9, 0, 0, 0, time.UTC)}
	tc := startController(t, Config{Clock: clock.now})
	var nodes []*fakeNode
	var agents []*lockAgent
	for i := range 3 {
		n := startNode(t, tc.brokerURL(), tc.secret, gateway(fmt.Sprintf("gw-%d", i), nil))
		a := &lockAgent{clock: clock.now}
		n.setBehaviourWhenPlaced(a.behave)
		nodes, agents = append(nodes, n), append(agents, a)
	}
	ctx := context.Background()
	tc.applyYAML(t, lockedExporter("exporter:1"))
	v1 := waitRollout(t, tc, complete("")).CurrentHash

	held0 := clock.now().Add(-time.Minute)
	agents[0].setLock(nodes[0], held0)
	waitRollout(t, tc, instanceLock("gw-0", func(l *api.UpdateLock) bool { return l != nil && l.HeldSince.Equal(held0) }))
	agents[1].mu.Lock()
	agents[1].takeOnUpdate = true
	agents[1].mu.Unlock()

	tc.applyYAML(t, lockedExporter("exporter:2"))
	ds := waitRollout(t, tc, func(ds api.DaemonSet) error {
		if r := ds.Status.Rollout; r == nil || r.Target == v1 || r.Updated != 1 || r.HeldByLock != 2 {
			return fmt.Errorf("want 1 node updated and 2 held by their lock: %+v", r)
		}
		return nil
	})
	v2 := ds.CurrentHash
	assert.Equal(t, v2, agents[2].runs())
	assert.Equal(t, []string{v1}, nodes[1].revisions(), "gw-1's agent deferred: it is asked to keep v1")
	assert.True(t, slices.ContainsFunc(desiredHistory(nodes[1]), func(d schema.DesiredState) bool { return hasRevision(d, v2) }),
		"gw-1 was moved before its lock was seen")
	assert.False(t, slices.ContainsFunc(desiredHistory(nodes[0]), func(d schema.DesiredState) bool { return hasRevision(d, v2) }),
		"gw-0 was known to hold its lock: never moved")
	assert.Zero(t, ds.Status.Rollout.StaleLocks)

	_, err := tc.api.ForceRollout(ctx, exporter, "gw-0")
	require.ErrorContains(t, err, `node "gw-0" holds no stale update lock of daemonset monitoring/exporter`)

	clock.advance(10 * time.Minute)
	tc.wake()
	ds = waitRollout(t, tc, func(ds api.DaemonSet) error {
		if r := ds.Status.Rollout; r.StaleLocks != 2 {
			return fmt.Errorf("want 2 stale locks: %+v", r)
		}
		return nil
	})
	for _, in := range ds.Instances {
		if in.Node != "gw-2" {
			require.NotNil(t, in.UpdateLock, "%s", in.Node)
			assert.True(t, in.UpdateLock.Stale, "%s", in.Node)
		}
	}
	waitEvents(t, tc, rollout.ReasonUpdateLockStale, 2) // the event sink writes them after the pass

	ds, err = tc.api.ForceRollout(ctx, exporter, "gw-0")
	require.NoError(t, err)
	checkfor.Eventually(t, wait, 20*time.Millisecond, func() error {
		d, _ := nodes[0].lastDesired()
		if !hasRevision(d, v2) {
			return fmt.Errorf("gw-0 not moved: %+v", d)
		}
		if got := d.Instances[0].OverrideUpdateLock; got != schema.FormatLockInstant(held0) {
			return fmt.Errorf("override %q, want the lock of %s", got, held0)
		}
		return nil
	})
	ds = waitRollout(t, tc, func(ds api.DaemonSet) error {
		if r := ds.Status.Rollout; r.Updated != 2 || r.HeldByLock != 1 {
			return fmt.Errorf("want gw-0 updated past its overridden lock, gw-1 still held: %+v", r)
		}
		return nil
	})
	assert.Equal(t, v2, agents[0].runs())
	overridden := waitEvents(t, tc, ReasonUpdateLocksOverridden, 1)
	assert.Contains(t, overridden[0].Message, "node gw-0 (held since "+held0.Format(time.RFC3339)+")")

	agents[1].mu.Lock()
	agents[1].takeOnUpdate = false
	agents[1].mu.Unlock()
	agents[1].setLock(nodes[1], time.Time{})
	waitRollout(t, tc, complete(v2))
	assert.Equal(t, v2, agents[1].runs())
}

// instanceLock waits for node's instance to report a lock that ok
// accepts.
func instanceLock(node string, ok func(*api.UpdateLock) bool) func(api.DaemonSet) error {
	return func(ds api.DaemonSet) error {
		for _, in := range ds.Instances {
			if in.Node == node && ok(in.UpdateLock) {
				return nil
			}
		}
		return fmt.Errorf("node %s: lock not as wanted: %+v", node, ds.Instances)
	}
}

func desiredHistory(n *fakeNode) []schema.DesiredState {
	n.mu.Lock()
	defer n.mu.Unlock()
	return slices.Clone(n.desired)
}

func hasRevision(d schema.DesiredState, rev string) bool {
	return slices.ContainsFunc(d.Instances, func(in schema.DesiredInstance) bool { return in.Revision == rev })
}

// waitEvents waits until the daemonset has n events of reason, and
// returns them.
func waitEvents(t *testing.T, tc *testController, reason string, n int) []api.Event {
	t.Helper()
	var evs []api.Event
	checkfor.Eventually(t, wait, 20*time.Millisecond, func() error {
		if evs = eventsOf(t, tc, reason); len(evs) != n {
			return fmt.Errorf("%d %s events, want %d: %+v", len(evs), reason, n, evs)
		}
		return nil
	})
	return evs
}

func eventsOf(t *testing.T, tc *testController, reason string) []api.Event {
	t.Helper()
	evs, err := tc.api.Events(context.Background(), api.EventFilter{Object: dsObject(exporter), Limit: 1000})
	require.NoError(t, err)
	var out []api.Event
	for _, e := range evs {
		if e.Reason == reason {
			out = append(out, e)
		}
	}
	return out
}
