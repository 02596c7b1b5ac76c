package rollout

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgeset/edgeset/schema"
)

func locked(in Instance, since time.Time) Instance {
	in.LockedSince = since
	return in
}

func deferred(in Instance, since time.Time) Instance {
	in.LockedSince, in.LockDeferred = since, true
	return in
}

// TestStepUpdateLocks tables what a held, deferred, stale and overridden
// lock does to one step.
func TestStepUpdateLocks(t *testing.T) {
	now := t0.Add(2 * time.Hour)
	held := now.Add(-10 * time.Minute)
	old := now.Add(-90 * time.Minute) // stale after an hour
	one := Strategy{MaxUnavailable: schema.FromInt(1), UpdateLockStaleAfter: time.Hour}
	surge := Strategy{MaxUnavailable: schema.FromInt(0), MaxSurge: schema.FromInt(1), UpdateLockStaleAfter: time.Hour}
	rolling := State{Target: "v2", Stable: "v1"}
	tests := []struct {
		name       string
		strategy   Strategy
		state      State
		nodes      []Node
		wantAssign map[string][]string
		wantStatus func(*Status)
		wantState  func(*State)
		wantEvents []string
		wantNext   time.Time
	}{
		{
			name: "a held node is passed over for the next",
			nodes: []Node{on("n00", []string{"v1"}, locked(ready("v1"), held)), on("n01", []string{"v1"}, ready("v1")),
				on("n02", []string{"v1"}, ready("v1"))},
			wantAssign: map[string][]string{"n00": {"v1"}, "n01": {"v2"}, "n02": {"v1"}},
			wantStatus: func(st *Status) { st.HeldByLock, st.Updating, st.Waiting, st.Unavailable = 1, 1, 1, 1 },
			wantState:  func(st *State) { movedAt(st, "n01", now) },
			wantNext:   held.Add(time.Hour),
		},
		{
			name:       "a node whose agent deferred gives its place back, and the next moves in it",
			nodes:      []Node{on("n00", []string{"v2"}, deferred(ready("v1"), held)), on("n01", []string{"v1"}, ready("v1"))},
			state:      withProgress(State{Target: "v2", Stable: "v1"}, map[string]time.Time{"n00": t0}, map[string]string{"n00": "x"}),
			wantAssign: map[string][]string{"n00": {"v1"}, "n01": {"v2"}},
			wantStatus: func(st *Status) { st.HeldByLock, st.Updating, st.Unavailable = 1, 1, 1 },
			wantState:  func(st *State) { movedAt(st, "n01", now) },
			wantNext:   held.Add(time.Hour),
		},
		{
			name:       "a surge pair deferred gives its surge slot back",
			strategy:   surge,
			nodes:      []Node{on("n00", []string{"v1", "v2"}, deferred(ready("v1"), held)), on("n01", []string{"v1"}, ready("v1"))},
			state:      withProgress(State{Target: "v2", Stable: "v1"}, map[string]time.Time{"n00": t0}, nil),
			wantAssign: map[string][]string{"n00": {"v1"}, "n01": {"v1", "v2"}},
			wantStatus: func(st *Status) { st.HeldByLock, st.Updating, st.MaxUnavailable = 1, 1, 0 },
			wantState:  func(st *State) { movedAt(st, "n01", now) },
			wantNext:   held.Add(time.Hour),
		},
		{
			name:       "a lock not deferred on a moved node waits for its agent",
			nodes:      []Node{on("n00", []string{"v2"}, locked(ready("v1"), held)), on("n01", []string{"v1"}, ready("v1"))},
			state:      withProgress(State{Target: "v2", Stable: "v1"}, map[string]time.Time{"n00": now}, map[string]string{"n00": "x"}),
			wantAssign: map[string][]string{"n00": {"v2"}, "n01": {"v1"}},
			wantStatus: func(st *Status) { st.Updating, st.Waiting, st.Unavailable = 1, 1, 1 },
			wantState: func(st *State) {
				movedAt(st, "n00", now)
			},
			wantNext: held.Add(time.Hour),
		},
		{
			name:       "a lock on the target's instance holds nothing",
			nodes:      []Node{on("n00", []string{"v2"}, locked(ready("v2"), old))},
			wantAssign: map[string][]string{"n00": {"v2"}},
			wantStatus: func(st *Status) { st.Updated, st.Complete = 1, true },
			wantState:  func(st *State) { st.Stable, st.Previous, st.Complete = "v2", "v1", true },
			wantEvents: []string{ReasonComplete},
		},
		{
			name:       "a lock held past the limit is stale, once",
			nodes:      []Node{on("n00", []string{"v1"}, locked(ready("v1"), old)), on("n01", []string{"v2"}, ready("v2"))},
			wantAssign: map[string][]string{"n00": {"v1"}, "n01": {"v2"}},
			wantStatus: func(st *Status) { st.HeldByLock, st.StaleLocks, st.Updated = 1, 1, 1 },
			wantState:  func(st *State) { st.StaleLocks = map[string]time.Time{"n00": old} },
			wantEvents: []string{ReasonUpdateLockStale},
		},
		{
			name:       "a stale lock already reported is not reported again",
			nodes:      []Node{on("n00", []string{"v1"}, locked(ready("v1"), old)), on("n01", []string{"v2"}, ready("v2"))},
			state:      State{Target: "v2", Stable: "v1", StaleLocks: map[string]time.Time{"n00": old}},
			wantAssign: map[string][]string{"n00": {"v1"}, "n01": {"v2"}},
			wantStatus: func(st *Status) { st.HeldByLock, st.StaleLocks, st.Updated = 1, 1, 1 },
			wantState:  func(st *State) { st.StaleLocks = map[string]time.Time{"n00": old} },
		},
		{
			name:       "no limit: never stale",
			strategy:   Strategy{MaxUnavailable: schema.FromInt(1)},
			nodes:      []Node{on("n00", []string{"v1"}, locked(ready("v1"), old)), on("n01", []string{"v2"}, ready("v2"))},
			state:      State{Target: "v2", Stable: "v1"},
			wantAssign: map[string][]string{"n00": {"v1"}, "n01": {"v2"}},
			wantStatus: func(st *Status) { st.HeldByLock, st.Updated = 1, 1 },
		},
		{
			name:  "an overridden lock moves under the budget like a free one",
			nodes: []Node{on("n00", []string{"v1"}, locked(ready("v1"), old)), on("n01", []string{"v1"}, ready("v1"))},
			state: State{Target: "v2", Stable: "v1", StaleLocks: map[string]time.Time{"n00": old},
				LockOverrides: map[string]time.Time{"n00": old}},
			wantAssign: map[string][]string{"n00": {"v2"}, "n01": {"v1"}},
			wantStatus: func(st *Status) { st.StaleLocks, st.Updating, st.Waiting, st.Unavailable = 1, 1, 1, 1 },
			wantState: func(st *State) {
				st.StaleLocks, st.LockOverrides = map[string]time.Time{"n00": old}, map[string]time.Time{"n00": old}
				movedAt(st, "n00", now)
			},
		},
		{
			name:  "a lock taken after the override holds, and the old entries go",
			nodes: []Node{on("n00", []string{"v1"}, locked(ready("v1"), held)), on("n01", []string{"v2"}, ready("v2"))},
			state: State{Target: "v2", Stable: "v1", StaleLocks: map[string]time.Time{"n00": old},
				LockOverrides: map[string]time.Time{"n00": old}},
			wantAssign: map[string][]string{"n00": {"v1"}, "n01": {"v2"}},
			wantStatus: func(st *Status) { st.HeldByLock, st.Updated = 1, 1 },
			wantNext:   held.Add(time.Hour),
		},
		{
			name:       "a released lock drops its entries",
			nodes:      []Node{on("n00", []string{"v1"}, ready("v1")), on("n01", []string{"v2"}, ready("v2"))},
			state:      State{Target: "v2", Stable: "v1", StaleLocks: map[string]time.Time{"n00": old}, LockOverrides: map[string]time.Time{"n00": old}},
			wantAssign: map[string][]string{"n00": {"v2"}, "n01": {"v2"}},
			wantStatus: func(st *Status) { st.Updated, st.Updating, st.Unavailable = 1, 1, 1 },
			wantState: func(st *State) {
				movedAt(st, "n00", now)
			},
		},
		{
			name: "an offline node keeps its entries",
			strategy: Strategy{MaxUnavailable: schema.FromInt(1), UpdateLockStaleAfter: time.Hour,
				OfflineGrace: time.Minute},
			nodes: []Node{{Name: "n00", OfflineSince: now.Add(-time.Hour), Assigned: []string{"v1"}},
				on("n01", []string{"v2"}, ready("v2"))},
			state:      State{Target: "v2", Stable: "v1", StaleLocks: map[string]time.Time{"n00": old}},
			wantAssign: map[string][]string{"n00": {"v1"}, "n01": {"v2"}},
			wantStatus: func(st *Status) { st.Offline, st.Updated, st.StaleLocks, st.Complete = 1, 1, 1, true },
			wantState: func(st *State) {
				st.StaleLocks, st.Stable, st.Previous, st.Complete = map[string]time.Time{"n00": old}, "v2", "v1", true
			},
			wantEvents: []string{ReasonComplete},
		},
		{
			name:       "held while its window is closed: waiting for the window",
			strategy:   withWindow(one, "0 0 1 1 *"),
			nodes:      []Node{on("n00", []string{"v1"}, locked(ready("v1"), held))},
			wantAssign: map[string][]string{"n00": {"v1"}},
			wantStatus: func(st *Status) { st.WaitingForWindow, st.NextWindow = 1, time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC) },
			wantNext:   held.Add(time.Hour),
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := tc.strategy
			if s.MaxUnavailable == (schema.IntOrString{}) && s.MaxSurge == (schema.IntOrString{}) {
				s = one
			}
			st := tc.state
			if st.Target == "" {
				st = rolling
			}
			d := Step(now, s, st, tc.nodes)
			assert.Equal(t, tc.wantAssign, d.Assign)
			want := Status{Target: "v2", Total: len(tc.nodes), MaxUnavailable: 1}
			if tc.wantStatus != nil {
				tc.wantStatus(&want)
			}
			assert.Equal(t, want, d.Status)
			wantState := State{Target: "v2", Stable: "v1"}
			if tc.wantState != nil {
				tc.wantState(&wantState)
			}
			assert.Equal(t, normalState(wantState), normalState(d.State))
			var reasons []string
			for _, e := range d.Events {
				reasons = append(reasons, e.Reason)
			}
			assert.Equal(t, tc.wantEvents, reasons)
			assert.True(t, tc.wantNext.Equal(d.RequeueAt), "requeue %s, want %s", d.RequeueAt, tc.wantNext)
		})
	}
}

// movedAt records in st the entries of a node moved to the target at now.
func movedAt(st *State, node string, now time.Time) {
	st.setAssigned(node, now)
	st.setPending(node, "not yet available")
}

func withWindow(s Strategy, schedule string) Strategy {
	s.Windows = mustWindows(schema.MaintenanceWindow{Schedule: schedule, Duration: "1h"})
	return s
}

func TestOverrideStaleLocks(t *testing.T) {
	st := State{Target: "v2", StaleLocks: map[string]time.Time{"a": t0, "b": t0.Add(time.Second)},
		LockOverrides: map[string]time.Time{"c": t0}}
	all, done := st.OverrideStaleLocks()
	assert.Equal(t, []string{"a", "b"}, done)
	assert.Equal(t, map[string]time.Time{"a": t0, "b": t0.Add(time.Second), "c": t0}, all.LockOverrides)
	assert.Equal(t, map[string]time.Time{"c": t0}, st.LockOverrides, "the receiver is not modified")

	one, done := st.OverrideStaleLocks("b", "c")
	assert.Equal(t, []string{"b"}, done, "c holds no stale lock")
	assert.Equal(t, map[string]time.Time{"b": t0.Add(time.Second), "c": t0}, one.LockOverrides)

	_, done = st.OverrideStaleLocks("x")
	assert.Empty(t, done)
}

// simLock is a simulated daemon's update lock and its agent's gate
// (the agent side of the protocol in locks.go).
type simLock struct {
	since time.Time // zero: free
	stuck bool      // the daemon never releases it
	// latch is the assignment the agent deferred, latchSince the lock
	// that made it: the agent reports it deferred, and does not act on
	// that assignment, until the controller assigns something else.
	latch      []string
	latchSince time.Time
	// override is what the controller sent with the node's last new
	// assignment: a lock taken then or before may be broken.
	override time.Time
	// deferrals and broken count what the agent did.
	deferrals, broken int
}

// lockBehaviour is how the simulated daemons use their locks.
type lockBehaviour struct{ take, release float64 }

func (l *simLock) report(in *Instance) {
	switch {
	case l.latch != nil:
		in.LockedSince, in.LockDeferred = l.latchSince, true
	case !l.since.IsZero():
		in.LockedSince = l.since
	}
}

// driveLock lets a node's daemon take or release its lock; a node that
// runs nothing holds none.
func (sm *sim) driveLock(n *simNode) {
	l := &n.lock
	switch {
	case len(n.running) == 0:
		l.since = time.Time{}
	case l.since.IsZero() && sm.rng.Float64() < sm.locks.take:
		l.since = sm.now
	case !l.since.IsZero() && !l.stuck && sm.rng.Float64() < sm.locks.release:
		l.since = time.Time{}
	}
}

// deferForLock is the agent's gate before it applies an assignment: it
// reports whether the agent keeps what runs. An assignment that starts
// an instance beside or instead of a running one waits while the lock is
// held, unless the controller overrode it; a deferred assignment waits
// for the controller's answer even once the lock is released. A switch
// takes the lock away with the instance that held it.
func (sm *sim) deferForLock(n *simNode) bool {
	l := &n.lock
	if l.latch != nil {
		if slices.Equal(l.latch, n.assigned) {
			return true
		}
		l.latch = nil
	}
	if !disrupts(n) {
		return false
	}
	switch {
	case l.since.IsZero():
	case !l.override.IsZero() && !l.since.After(l.override):
		l.broken++
	default:
		l.latch, l.latchSince = slices.Clone(n.assigned), l.since
		l.deferrals++
		return true
	}
	l.since = time.Time{}
	return false
}

// disrupts reports whether applying n's assignment would start an
// instance while another runs.
func disrupts(n *simNode) bool {
	if len(n.running) == 0 {
		return false
	}
	for _, rev := range n.assigned {
		if _, ok := n.running[rev]; !ok {
			return true
		}
	}
	return false
}

// checkLocks asserts, on the controller's view, that a step never moves
// a node whose lock is held and not overridden (it may only give a
// deferred node's place back, to the instance that holds the lock), and
// that a deferred node always gets its answer.
func checkLocks(t *testing.T, now time.Time, s Strategy, before State, in []Node, d Decision) {
	t.Helper()
	p := &pass{now: now, s: s, st: before}
	for i := range in {
		v := p.viewOf(&in[i])
		l, held := p.heldLock(&v)
		if !held || v.offline {
			continue
		}
		got := d.Assign[v.Name]
		for _, rev := range got {
			if !slices.Contains(v.Assigned, rev) && rev != l.revision {
				t.Fatalf("at %s: node %s holds its lock (since %s) and was moved from %v to %v", now.Sub(t0), v.Name, l.since, v.Assigned, got)
			}
		}
		if l.deferred && !slices.Equal(got, []string{l.revision}) {
			t.Fatalf("at %s: node %s deferred its switch and was left on %v, not given back %s", now.Sub(t0), v.Name, got, l.revision)
		}
	}
}

// TestPropertyUpdateLocks: over random fleets and strategies whose
// daemons take and release update locks at random (a few never release
// theirs), with flapping links and late reports, every step keeps the
// budget, never moves a node whose lock holds unless overridden, and
// answers every deferral by giving the node's place back; locks that
// never go become stale (with one event each); once an operator
// overrides them, every reachable node ends on the target, the stuck
// daemons' locks broken by their agents.
func TestPropertyUpdateLocks(t *testing.T) {
	deferrals, broken, stale := 0, 0, 0
	for seed := uint64(1); seed <= 50; seed++ {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 17))
			s := randomStrategy(rng)
			s.UpdateLockStaleAfter = 20 * time.Second
			sm := newSim(seed, 5+rng.IntN(30), s)
			sm.locks = lockBehaviour{take: 0.02 + 0.1*rng.Float64(), release: 0.05 + 0.2*rng.Float64()}
			sm.flapProb = 0.02 * float64(rng.IntN(3))
			sm.lateProb = 0.2 * float64(rng.IntN(2))
			stuck := map[string]bool{}
			for range 1 + rng.IntN(2) {
				n := sm.nodes[rng.IntN(len(sm.nodes))]
				n.lock.since, n.lock.stuck = sm.now, true
				stuck[n.name] = true
			}
			sm.st = sm.st.Retarget("v2")
			for range 200 {
				sm.tick()
				sm.stepChecked(t)
			}
			for _, n := range sm.nodes {
				if n.lock.stuck && n.online {
					require.Contains(t, n.running, "v1", "node %s switched under a lock never released", n.name)
				}
			}
			sm.locks.take = 0
			sm.healLinks()
			for range 400 {
				sm.st, _ = sm.st.OverrideStaleLocks() // rollout resume --force, again as locks become stale
				sm.tick()
				sm.stepChecked(t)
				if sm.converged("v2") {
					for _, n := range sm.nodes {
						deferrals += n.lock.deferrals
						broken += n.lock.broken
						if n.lock.stuck {
							assert.NotZero(t, n.lock.broken, "node %s ended on v2 without breaking its stuck lock", n.name)
						}
					}
					stale += countReason(sm.lastEvent, ReasonUpdateLockStale)
					return
				}
			}
			t.Fatalf("not converged to v2 with strategy %+v; state %+v", sm.s, sm.st)
		})
	}
	t.Logf("%d deferrals answered, %d stuck locks broken, %d stale events", deferrals, broken, stale)
	assert.NotZero(t, deferrals, "no agent ever deferred: the race between a move and a lock was never drawn")
}

// stepChecked is sim.step with the lock invariants checked too.
func (sm *sim) stepChecked(t *testing.T) {
	t.Helper()
	before := cloneState(sm.st)
	in := make([]Node, len(sm.nodes))
	for i, n := range sm.nodes {
		in[i] = Node{Name: n.name, Online: n.online, OfflineSince: n.offSince,
			Assigned: slices.Clone(n.assigned), Observed: slices.Clone(n.reported), Labels: n.labels}
	}
	d := sm.step(t)
	checkLocks(t, sm.now, sm.s, before, in, d)
	seen := map[string]bool{}
	for _, e := range sm.lastEvent {
		if e.Reason != ReasonUpdateLockStale {
			continue
		}
		key := e.Node + ": " + e.Message
		require.False(t, seen[key], "stale lock reported twice: %s", key)
		seen[key] = true
	}
}

func countReason(events []Event, reason string) int {
	n := 0
	for _, e := range events {
		if e.Reason == reason {
			n++
		}
	}
	return n
}
