package rollout

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgeset/edgeset/schema"
)

// fleetModel is a controller driving a Tracker: it holds every node's
// facts, checks each Delta against Step over all of them, applies the
// assignments as publishing desired states does, and changes the world at
// random.
type fleetModel struct {
	rng         *rand.Rand
	now         time.Time
	s           Strategy
	tr          *Tracker
	nodes       map[string]*Node
	names       []string // sorted, for deterministic picks
	revisions   []string // every revision so far, the target last
	lastRequeue time.Time
	nextNode    int
	full, steps int
	reasons     map[string]int // events seen, by reason
	// stored is what a controller that writes each changed state as its
	// Head and its Changed entries (all of them when AllChanged) holds.
	stored State
	// partial counts the changed states written as Changed entries only.
	partial int
	// locks counts what the steps did with update locks: nodes held,
	// nodes that gave their place back, overridden nodes moved.
	locks lockCounts
}

type lockCounts struct{ held, yielded, overridden int }

func (c *lockCounts) add(o lockCounts) {
	c.held, c.yielded, c.overridden = c.held+o.held, c.yielded+o.yielded, c.overridden+o.overridden
}

// countLocks counts, in a step's decision, the held nodes and the nodes
// that gave their place back or moved past an overridden lock.
func (m *fleetModel) countLocks(before State, want Decision) {
	m.locks.held += want.Status.HeldByLock
	for _, name := range m.names {
		n := m.nodes[name]
		revs := want.Assign[name]
		if slices.Equal(revs, n.Assigned) {
			continue
		}
		for _, in := range n.Observed {
			switch {
			case in.LockedSince.IsZero() || in.Revision == before.Target:
			case in.LockDeferred && slices.Equal(revs, []string{in.Revision}):
				m.locks.yielded++
			case before.LockOverrides[name].Equal(in.LockedSince) && slices.Contains(revs, want.State.Target):
				m.locks.overridden++
			}
		}
	}
}

func newFleetModel(seed uint64) *fleetModel {
	m := &fleetModel{rng: rand.New(rand.NewPCG(seed, 0x7a11)), now: t0, nodes: map[string]*Node{},
		revisions: []string{"v1"}, reasons: map[string]int{}}
	m.s = randomTrackerStrategy(m.rng)
	m.stored = State{Target: "v1", Stable: "v1", Complete: true}
	m.tr = NewTracker(m.s, m.stored)
	for range 1 + m.rng.IntN(25) {
		m.addNode([]string{"v1"}, ready("v1"))
	}
	return m
}

func randomTrackerStrategy(rng *rand.Rand) Strategy {
	s := randomStrategy(rng)
	s.OnDelete = rng.IntN(8) == 0
	s.OfflineGrace = time.Duration(rng.IntN(3)) * 3 * time.Second
	s.ProgressDeadline = time.Duration(rng.IntN(3)) * 5 * time.Second
	if rng.IntN(3) == 0 {
		s.FailureThreshold = ptr(schema.FromInt(int32(1 + rng.IntN(3))))
		if rng.IntN(2) == 0 {
			s.FailureThreshold = ptr(schema.FromString(fmt.Sprintf("%d%%", 10+rng.IntN(50))))
		}
		s.AutoRollback = rng.IntN(2) == 0
	}
	if rng.IntN(3) == 0 {
		s.CanaryNodes = ptr(schema.FromInt(int32(1 + rng.IntN(3))))
		if rng.IntN(2) == 0 {
			s.CanaryNodes = ptr(schema.FromString(fmt.Sprintf("%d%%", 5+rng.IntN(40))))
		}
		s.CanaryAutoPromote = time.Duration(rng.IntN(3)) * 4 * time.Second
	}
	s.Paused = rng.IntN(10) == 0
	randomSchedule(rng, &s)
	randomPrefetch(rng, &s)
	s.UpdateLockStaleAfter = time.Duration(rng.IntN(3)) * 5 * time.Second
	return s
}

func (m *fleetModel) addNode(assigned []string, observed ...Instance) {
	name := fmt.Sprintf("n%03d", m.nextNode)
	m.nextNode++
	n := &Node{Name: name, Online: true, Assigned: assigned, Observed: observed, Labels: randomLabels(m.rng),
		CanPrefetch: m.rng.IntN(5) != 0}
	m.nodes[name] = n
	i, _ := slices.BinarySearch(m.names, name)
	m.names = slices.Insert(m.names, i, name)
	m.tr.Set(cloneNode(*n))
}

func cloneNode(n Node) Node {
	n.Assigned = slices.Clone(n.Assigned)
	n.Observed = slices.Clone(n.Observed)
	n.Prefetched = slices.Clone(n.Prefetched)
	n.Labels = maps.Clone(n.Labels)
	return n
}

func (m *fleetModel) fleet() []Node {
	out := make([]Node, 0, len(m.names))
	for _, name := range m.names {
		out = append(out, cloneNode(*m.nodes[name]))
	}
	return out
}

// step checks one Tracker.Step against Step over every node, then applies
// the assignment (most of the time: a controller may lag behind).
func (m *fleetModel) step(t *testing.T, seed uint64, step int) {
	t.Helper()
	before := cloneState(m.tr.State())
	want := Step(m.now, m.s, before, m.fleet())
	got := m.tr.Step(m.now)
	m.steps++
	if got.Full {
		m.full++
	}
	where := fmt.Sprintf("seed %d step %d (now +%s, full %v, strategy %+v)", seed, step, m.now.Sub(t0), got.Full, m.s)
	require.Equal(t, want.Status, got.Status, "status at %s", where)
	require.Equal(t, want.Events, got.Events, "events at %s", where)
	require.True(t, want.RequeueAt.Equal(got.RequeueAt), "requeue at %s: want %s, got %s", where, want.RequeueAt, got.RequeueAt)
	require.Equal(t, normalState(want.State), normalState(got.State), "state at %s", where)
	require.Equal(t, !reflect.DeepEqual(normalState(before), normalState(want.State)), got.StateChanged, "state changed at %s", where)
	m.checkChanged(t, where, before, got)
	require.Equal(t, m.tr.Len(), len(m.names))
	for _, name := range m.names {
		n := m.nodes[name]
		revs, ok := got.Assign[name]
		if !ok {
			revs = n.Assigned
		} else {
			require.NotEqual(t, n.Assigned, revs, "%s: node %s reported unchanged", where, name)
		}
		require.Equal(t, want.Assign[name], revs, "%s: node %s (facts %+v)", where, name, n)
		ask, ok := got.Prefetch[name]
		if !ok {
			ask = n.Prefetching
		} else {
			require.NotEqual(t, n.Prefetching, ask, "%s: node %s: prefetch reported unchanged", where, name)
		}
		require.Equal(t, want.Prefetch[name], ask, "%s: node %s: prefetch (facts %+v)", where, name, n)
	}
	m.lastRequeue = want.RequeueAt
	m.countLocks(before, want)
	for _, e := range got.Events {
		m.reasons[e.Reason]++
	}
	for _, name := range m.names {
		n := m.nodes[name]
		if revs := want.Assign[name]; !slices.Equal(revs, n.Assigned) && m.rng.IntN(10) != 0 {
			n.Assigned = slices.Clone(revs)
			m.tr.Set(cloneNode(*n))
		}
		if ask := want.Prefetch[name]; ask != n.Prefetching && m.rng.IntN(10) != 0 {
			n.Prefetching = ask
			m.tr.Set(cloneNode(*n))
		}
	}
}

// checkChanged checks that the entries got reports changed are the ones
// that changed since before, and that a store written with them holds the
// state.
func (m *fleetModel) checkChanged(t *testing.T, where string, before State, got Delta) {
	t.Helper()
	require.True(t, slices.IsSorted(got.Changed), "changed not sorted at %s: %v", where, got.Changed)
	if !got.AllChanged {
		require.Equal(t, normalState(got.State), normalState(applyChanged(before, got)),
			"the state before with the changed entries %v at %s", got.Changed, where)
	}
	switch {
	case got.StateChanged && got.AllChanged:
		m.stored = cloneState(got.State)
	case got.StateChanged:
		m.stored = applyChanged(m.stored, got)
		m.partial++
	case got.AllChanged:
		return // the tracker's state may differ from the stored one until it changes
	}
	require.Equal(t, normalState(got.State), normalState(m.stored), "stored state at %s", where)
}

// applyChanged is prev written over with d's head and Changed entries.
func applyChanged(prev State, d Delta) State {
	return withEntries(withEntries(d.State.Head(), prev, nil), d.State, d.Changed)
}

// withEntries returns head with from's entries of nodes (every node with
// an entry in from when nodes is nil) set in its maps (copied).
func withEntries(head State, from State, nodes []string) State {
	out := cloneState(head)
	if nodes == nil {
		nodes = from.EntryNodes()
	}
	for _, node := range nodes {
		e, _ := from.Entry(node)
		out.SetEntry(node, e)
	}
	return out
}

// normalState drops empty maps so that nil and empty compare equal.
func normalState(st State) State {
	st = cloneState(st)
	if len(st.progress) == 0 {
		st.progress = nil
	}
	if len(st.Failed) == 0 {
		st.Failed = nil
	}
	if len(st.Away) == 0 {
		st.Away = nil
	}
	if len(st.StaleLocks) == 0 {
		st.StaleLocks = nil
	}
	if len(st.LockOverrides) == 0 {
		st.LockOverrides = nil
	}
	return st
}

// churn changes the world at random between two steps.
func (m *fleetModel) churn() {
	for _, name := range m.names {
		if m.rng.IntN(4) == 0 {
			m.report(m.nodes[name])
		}
	}
	switch r := m.rng.IntN(40); {
	case r < 3 && len(m.names) < 40:
		m.join()
	case r < 5 && len(m.names) > 1:
		m.leave()
	case r < 7:
		m.flipLink()
	case r < 12:
		m.operate()
	case r == 12:
		m.s = randomTrackerStrategy(m.rng)
		if m.tr.SetStrategy(m.s) {
			for _, name := range m.names {
				m.tr.Set(cloneNode(*m.nodes[name]))
			}
		}
	case r < 15:
		n := m.nodes[m.names[m.rng.IntN(len(m.names))]]
		n.Labels = randomLabels(m.rng) // moved to another site, or region
		m.tr.Set(cloneNode(*n))
	}
	m.advance()
}

// report makes a node report new instances for what it runs.
func (m *fleetModel) report(n *Node) {
	var obs []Instance
	for _, rev := range n.Assigned {
		obs = append(obs, m.instance(rev))
	}
	if m.rng.IntN(8) == 0 && len(m.revisions) > 1 {
		obs = append(obs, m.instance(m.revisions[m.rng.IntN(len(m.revisions))])) // stale or early
	}
	if m.rng.IntN(10) == 0 {
		obs = nil
	}
	n.Observed = obs
	n.Prefetched = m.prefetchReport(n)
	m.tr.Set(cloneNode(*n))
}

func (m *fleetModel) instance(rev string) Instance {
	in := m.plainInstance(rev)
	m.drawLock(&in)
	return in
}

// drawLock gives one instance in four an update lock, taken a moment or
// long ago (some stale, some becoming stale later), and one lock in three
// deferred.
func (m *fleetModel) drawLock(in *Instance) {
	if m.rng.IntN(4) != 0 {
		return
	}
	ago := []time.Duration{0, time.Second, 7 * time.Second, time.Hour}[m.rng.IntN(4)]
	in.LockedSince = m.now.Add(-ago)
	in.LockDeferred = m.rng.IntN(3) == 0
}

func (m *fleetModel) plainInstance(rev string) Instance {
	switch m.rng.IntN(8) {
	case 0, 1, 2:
		return Instance{Revision: rev, Ready: true, ReadySince: m.now.Add(-time.Duration(m.rng.IntN(4)) * time.Second),
			Phase: schema.PhaseRunning}
	case 3:
		return Instance{Revision: rev, Ready: true, ReadySince: t0.Add(-time.Hour), Phase: schema.PhaseRunning}
	case 4:
		return Instance{Revision: rev, Phase: schema.PhasePending}
	case 5:
		return Instance{Revision: rev, Phase: schema.PhaseRunning}
	case 6:
		return Instance{Revision: rev, Phase: schema.PhaseCrashLoopBackOff, Message: "exit 1"}
	}
	return Instance{Revision: rev, Phase: []string{schema.PhaseFailed, schema.PhaseRefused}[m.rng.IntN(2)], Message: "no"}
}

func (m *fleetModel) join() {
	switch m.rng.IntN(3) {
	case 0:
		m.addNode(nil)
	case 1:
		m.addNode([]string{m.revisions[0]}, ready(m.revisions[0]))
	default:
		target := m.tr.State().Target
		m.addNode([]string{target}, m.instance(target))
	}
}

func (m *fleetModel) leave() {
	i := m.rng.IntN(len(m.names))
	name := m.names[i]
	m.names = slices.Delete(m.names, i, i+1)
	delete(m.nodes, name)
	m.tr.Remove(name)
}

func (m *fleetModel) flipLink() {
	n := m.nodes[m.names[m.rng.IntN(len(m.names))]]
	if n.Online {
		n.Online, n.OfflineSince = false, m.now.Add(-time.Duration(m.rng.IntN(8))*time.Second)
	} else {
		n.Online, n.OfflineSince = true, time.Time{}
	}
	m.tr.Set(cloneNode(*n))
}

// operate is an operator (or the controller) replacing the state: pause,
// resume, promote, retarget.
func (m *fleetModel) operate() {
	st := cloneState(m.tr.State())
	switch m.rng.IntN(6) {
	case 5:
		st, _ = st.OverrideStaleLocks() // rollout resume --force
	case 0:
		st.OperatorPaused = !st.OperatorPaused
	case 1:
		st.Paused, st.PauseReason = false, ""
	case 2:
		st.CanaryPromoted = true
	case 3:
		rev := fmt.Sprintf("v%d", len(m.revisions)+1)
		m.revisions = append(m.revisions, rev)
		st = st.Retarget(rev)
	default:
		st = st.Retarget(m.revisions[m.rng.IntN(len(m.revisions))])
	}
	m.tr.SetState(st)
}

func (m *fleetModel) advance() {
	switch r := m.rng.IntN(10); {
	case r < 2:
	case r < 5 && m.lastRequeue.After(m.now):
		m.now = m.lastRequeue
	default:
		m.now = m.now.Add(time.Duration(m.rng.IntN(4000)) * time.Millisecond)
	}
}

// TestPropertyTrackerMatchesStep: over random sequences of node changes,
// joins and leaves, links flapping, operator actions, retargets, strategy
// changes and clock advances, every Tracker.Step returns what Step over
// every node returns.
func TestPropertyTrackerMatchesStep(t *testing.T) {
	seeds := []uint64{}
	for seed := uint64(1); seed <= 40; seed++ {
		seeds = append(seeds, seed)
	}
	seeds = append(seeds, rand.Uint64(), rand.Uint64(), rand.Uint64())
	full, steps, partial, reasons, locks := 0, 0, 0, map[string]int{}, lockCounts{}
	for _, seed := range seeds {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			m := newFleetModel(seed)
			m.tr.SetState(m.tr.State().Retarget("v2"))
			m.revisions = append(m.revisions, "v2")
			for step := range 300 {
				m.step(t, seed, step)
				m.churn()
			}
			full += m.full
			steps += m.steps
			partial += m.partial
			locks.add(m.locks)
			for reason, n := range m.reasons {
				reasons[reason] += n
			}
		})
	}
	t.Logf("%d steps, %d full (%.0f%%), %d changed states written as their changed entries; events %v; locks %+v",
		steps, full, 100*float64(full)/float64(max(steps, 1)), partial, reasons, locks)
	assert.NotZero(t, partial, "no changed state was written as its changed entries")
	assert.NotZero(t, locks.held, "no step held a node by its update lock")
	assert.NotZero(t, locks.yielded, "no node gave its place back after its agent deferred")
	assert.NotZero(t, locks.overridden, "no node moved past an overridden lock")
	for _, reason := range []string{ReasonInstanceFailed, ReasonPaused, ReasonRollback, ReasonComplete, ReasonCanaryWaiting, ReasonUpdateLockStale} {
		assert.NotZero(t, reasons[reason], "the sequences never produced %s", reason)
	}
}

// TestTrackerSteadyStateIsIncremental: in a complete rollout, one node's
// change is decided without visiting the others.
func TestTrackerSteadyStateIsIncremental(t *testing.T) {
	s := Strategy{MaxUnavailable: schema.FromString("10%"), MinReady: 5 * time.Second}
	nodes := fleetOn(50, "v1")
	tr := trackerOver(s, State{Target: "v1", Stable: "v1"}, nodes)
	now := t0.Add(time.Hour)
	d := tr.Step(now)
	require.True(t, d.Full, "the first step visits every node")
	assert.True(t, d.Status.Complete)
	assert.Empty(t, d.Assign)

	tests := []struct {
		name       string
		change     func() Node
		wantAssign map[string][]string
		wantStatus func(*Status)
	}{
		{
			name:   "restart: ready again within minReady",
			change: func() Node { return on("n07", []string{"v1"}, Instance{Revision: "v1", Ready: true, ReadySince: now}) },
			wantStatus: func(st *Status) {
				st.Updated, st.Updating, st.Unavailable, st.Complete = 49, 1, 1, false
			},
		},
		{
			name:       "a new node joins with nothing",
			change:     func() Node { return on("z-new", nil) },
			wantAssign: map[string][]string{"z-new": {"v1"}},
			wantStatus: func(st *Status) {
				st.Total, st.Updated, st.Updating, st.Unavailable, st.Complete = 51, 49, 2, 2, false
				st.MaxUnavailable = 6
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			n := tc.change()
			tr.Set(n)
			nodes = upsert(nodes, n)
			want := Step(now, s, cloneState(tr.State()), nodes)
			d := tr.Step(now)
			assert.False(t, d.Full)
			assert.Equal(t, tc.wantAssign, d.Assign)
			assert.Equal(t, want.Status, d.Status)
			status := Status{Target: "v1", Total: 50, MaxUnavailable: 5}
			tc.wantStatus(&status)
			assert.Equal(t, status, d.Status)
		})
	}
}

func trackerOver(s Strategy, st State, nodes []Node) *Tracker {
	tr := NewTracker(s, st)
	for _, n := range nodes {
		tr.Set(n)
	}
	return tr
}

func upsert(nodes []Node, n Node) []Node {
	for i := range nodes {
		if nodes[i].Name == n.Name {
			nodes[i] = n
			return nodes
		}
	}
	return append(nodes, n)
}

// TestTrackerRemove: removing nodes keeps the counts and the queue right.
func TestTrackerRemove(t *testing.T) {
	s := Strategy{MaxUnavailable: schema.FromInt(1), MinReady: 10 * time.Second}
	now := t0.Add(time.Hour)
	nodes := fleetOn(5, "v1")
	for i := range nodes {
		nodes[i].Observed[0].ReadySince = now.Add(-time.Duration(i) * time.Second) // each requeues
	}
	tr := trackerOver(s, State{Target: "v1"}, nodes)
	tr.Step(now)
	for _, name := range []string{"n00", "n04", "n02", "missing"} {
		tr.Remove(name)
	}
	assert.Equal(t, 2, tr.Len())
	rest := []Node{nodes[1], nodes[3]}
	for _, at := range []time.Time{now, now.Add(9 * time.Second), now.Add(time.Minute)} {
		want := Step(at, s, cloneState(tr.State()), rest)
		d := tr.Step(at)
		assert.Equal(t, want.Status, d.Status, "at %s", at)
		assert.True(t, want.RequeueAt.Equal(d.RequeueAt), "at %s: %s, want %s", at, d.RequeueAt, want.RequeueAt)
	}
}
