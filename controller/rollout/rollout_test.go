package rollout

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgeset/edgeset/schema"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func ready(rev string) Instance {
	return Instance{Revision: rev, Ready: true, ReadySince: t0, Phase: schema.PhaseRunning}
}

func notReady(rev, phase string) Instance { return Instance{Revision: rev, Phase: phase} }

func on(name string, assigned []string, observed ...Instance) Node {
	return Node{Name: name, Online: true, Assigned: assigned, Observed: observed}
}

func fleetOn(n int, rev string) []Node {
	nodes := make([]Node, n)
	for i := range nodes {
		nodes[i] = on(fmt.Sprintf("n%02d", i), []string{rev}, ready(rev))
	}
	return nodes
}

func countAssigned(d Decision, rev string) int {
	n := 0
	for _, revs := range d.Assign {
		if slices.Contains(revs, rev) {
			n++
		}
	}
	return n
}

func TestStepRollingUpdate(t *testing.T) {
	now := t0.Add(time.Hour)
	tests := []struct {
		name         string
		strategy     Strategy
		nodes        []Node
		wantOnTarget int
		wantPairs    int
	}{
		{
			name:         "maxUnavailable 1 moves one available node",
			strategy:     Strategy{MaxUnavailable: schema.FromInt(1)},
			nodes:        fleetOn(5, "old"),
			wantOnTarget: 1,
		},
		{
			name:         "percentage rounds up: 10% of 5 is 1",
			strategy:     Strategy{MaxUnavailable: schema.FromString("10%")},
			nodes:        fleetOn(5, "old"),
			wantOnTarget: 1,
		},
		{
			name:         "percentage 40% of 5 is 2",
			strategy:     Strategy{MaxUnavailable: schema.FromString("40%")},
			nodes:        fleetOn(5, "old"),
			wantOnTarget: 2,
		},
		{
			name:         "both zero means one",
			strategy:     Strategy{MaxUnavailable: schema.FromInt(0), MaxSurge: schema.FromInt(0)},
			nodes:        fleetOn(5, "old"),
			wantOnTarget: 1,
		},
		{
			name:     "unavailable old instances are replaced without spending budget",
			strategy: Strategy{MaxUnavailable: schema.FromInt(1)},
			nodes: append(fleetOn(3, "old"),
				on("x1", []string{"old"}, notReady("old", schema.PhaseCrashLoopBackOff)),
				on("x2", []string{"old"}, notReady("old", schema.PhaseCrashLoopBackOff))),
			// both broken nodes move; the budget (1) is already spent by them
			wantOnTarget: 2,
		},
		{
			name:         "surge runs pairs on maxSurge nodes",
			strategy:     Strategy{MaxUnavailable: schema.FromInt(0), MaxSurge: schema.FromInt(2)},
			nodes:        fleetOn(5, "old"),
			wantOnTarget: 2,
			wantPairs:    2,
		},
		{
			name:         "OnDelete moves nothing",
			strategy:     Strategy{OnDelete: true},
			nodes:        fleetOn(5, "old"),
			wantOnTarget: 0,
		},
		{
			name:         "paused moves nothing",
			strategy:     Strategy{MaxUnavailable: schema.FromInt(3), Paused: true},
			nodes:        fleetOn(5, "old"),
			wantOnTarget: 0,
		},
		{
			name:         "canary of 1 node holds the rest",
			strategy:     Strategy{MaxUnavailable: schema.FromInt(5), CanaryNodes: ptr(schema.FromInt(1))},
			nodes:        fleetOn(5, "old"),
			wantOnTarget: 1,
		},
		{
			name:         "new node with nothing gets the target at once",
			strategy:     Strategy{OnDelete: true},
			nodes:        append(fleetOn(2, "old"), on("fresh", nil)),
			wantOnTarget: 1,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := Step(now, tc.strategy, State{Target: "new", Stable: "old"}, tc.nodes)
			assert.Equal(t, tc.wantOnTarget, countAssigned(d, "new"), "nodes assigned the target: %v", d.Assign)
			pairs := 0
			for _, revs := range d.Assign {
				if len(revs) == 2 {
					pairs++
				}
			}
			assert.Equal(t, tc.wantPairs, pairs)
			assert.Len(t, d.Assign, len(tc.nodes), "every node gets an assignment")
		})
	}
}

func TestStepSurgeDropsOldOnceAvailable(t *testing.T) {
	s := Strategy{MaxSurge: schema.FromInt(1)}
	n := on("a", []string{"new", "old"}, ready("old"), ready("new"))
	d := Step(t0.Add(time.Hour), s, State{Target: "new"}, []Node{n})
	assert.Equal(t, []string{"new"}, d.Assign["a"])

	n.Observed = []Instance{ready("old"), notReady("new", schema.PhasePending)}
	d = Step(t0.Add(time.Hour), s, State{Target: "new"}, []Node{n})
	assert.Equal(t, []string{"new", "old"}, d.Assign["a"], "the pair stays until the new instance is available")
}

func TestStepMinReadySeconds(t *testing.T) {
	s := Strategy{MaxUnavailable: schema.FromInt(1), MinReady: 30 * time.Second}
	now := t0.Add(10 * time.Second) // ready since t0: not yet available
	longReady := Instance{Revision: "old", Ready: true, ReadySince: t0.Add(-time.Hour), Phase: schema.PhaseRunning}
	nodes := []Node{on("a", []string{"new"}, ready("new")), on("b", []string{"old"}, longReady)}
	d := Step(now, s, State{Target: "new"}, nodes)
	assert.Equal(t, []string{"old"}, d.Assign["b"], "a is not available yet, so the budget is spent")
	assert.Equal(t, t0.Add(30*time.Second), d.RequeueAt)

	d = Step(t0.Add(31*time.Second), s, State{Target: "new"}, nodes)
	assert.Equal(t, []string{"new"}, d.Assign["b"])
}

func TestStepOfflineNodesNeitherStallNorEscape(t *testing.T) {
	s := Strategy{MaxUnavailable: schema.FromInt(1), OfflineGrace: time.Minute}
	now := t0.Add(time.Hour)
	away := Node{Name: "away", OfflineSince: now.Add(-10 * time.Minute), Assigned: []string{"old"}, Observed: []Instance{ready("old")}}
	nodes := []Node{away, on("a", []string{"new"}, ready("new")), on("b", []string{"new"}, ready("new"))}
	d := Step(now, s, State{Target: "new"}, nodes)
	assert.True(t, d.Status.Complete, "the rollout completes among reachable nodes")
	assert.Equal(t, 1, d.Status.Offline)
	assert.Equal(t, []string{"old"}, d.Assign["away"], "an offline node is not moved while away")
	require.Len(t, d.Events, 1)
	assert.Equal(t, ReasonComplete, d.Events[0].Reason)

	away.Online, away.OfflineSince = true, time.Time{}
	nodes[0] = away
	d = Step(now, s, d.State, nodes)
	assert.Equal(t, []string{"new"}, d.Assign["away"], "a returning node is updated under the budget")
}

// TestStepNodeOfflineMidUpdateKeepsItsSlot: a node moved to the target
// that went away before it was seen serving it keeps spending budget past
// the grace period, since it switches whenever it returns; one seen
// serving the target, one still waiting, or one moved while it was away
// already, spends none.
func TestStepNodeOfflineMidUpdateKeepsItsSlot(t *testing.T) {
	s := Strategy{MaxUnavailable: schema.FromInt(1), OfflineGrace: time.Minute}
	now := t0.Add(time.Hour)
	for _, tt := range []struct {
		name     string
		away     Node
		moves    bool
		inFlight int
	}{
		{"moved, not seen on the target", Node{Name: "away", OfflineSince: now.Add(-10 * time.Minute), Assigned: []string{"new"}, Observed: []Instance{ready("old")}}, false, 1},
		{"moved, nothing observed", Node{Name: "away", OfflineSince: now.Add(-10 * time.Minute), Assigned: []string{"new"}}, false, 1},
		{"moved while already away", Node{Name: "late", OfflineSince: now.Add(-10 * time.Minute), Assigned: []string{"new"}, Observed: []Instance{ready("old")}}, true, 0},
		{"seen serving the target", Node{Name: "away", OfflineSince: now.Add(-10 * time.Minute), Assigned: []string{"new"}, Observed: []Instance{ready("new")}}, true, 0},
		{"still waiting", Node{Name: "away", OfflineSince: now.Add(-10 * time.Minute), Assigned: []string{"old"}, Observed: []Instance{ready("old")}}, true, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			// "away" was moved an hour ago, before it went away; "late"
			// five minutes ago, while it was away already.
			st := withProgress(State{Target: "new"}, map[string]time.Time{"away": now.Add(-time.Hour), "late": now.Add(-5 * time.Minute)}, nil)
			d := Step(now, s, st, []Node{tt.away, on("a", []string{"old"}, ready("old"))})
			assert.Equal(t, tt.moves, slices.Equal(d.Assign["a"], []string{"new"}), "a: %v", d.Assign["a"])
			assert.Equal(t, 1, d.Status.Offline)
			assert.Equal(t, tt.inFlight+boolInt(tt.moves), d.Status.Unavailable)
			tr := NewTracker(s, st)
			tr.Set(tt.away)
			tr.Set(on("a", []string{"old"}, ready("old")))
			td := tr.Step(now)
			assert.Equal(t, tt.moves, slices.Equal(td.Assign["a"], []string{"new"}), "the Tracker decides as Step does: %v", td.Assign)
		})
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func TestStepNewlyOfflineNodeCountsAgainstBudget(t *testing.T) {
	s := Strategy{MaxUnavailable: schema.FromInt(1), OfflineGrace: time.Minute}
	now := t0.Add(time.Hour)
	brief := Node{Name: "brief", OfflineSince: now.Add(-10 * time.Second), Assigned: []string{"new"}, Observed: []Instance{ready("old")}}
	nodes := []Node{brief, on("a", []string{"old"}, ready("old"))}
	d := Step(now, s, State{Target: "new"}, nodes)
	assert.Equal(t, []string{"old"}, d.Assign["a"], "the briefly offline node still holds the budget")
	assert.Equal(t, now.Add(50*time.Second), d.RequeueAt)
}

func TestStepFailureThresholdPausesAndRollsBack(t *testing.T) {
	s := Strategy{MaxUnavailable: schema.FromInt(2), ProgressDeadline: time.Minute, FailureThreshold: ptr(schema.FromInt(2))}
	now := t0.Add(time.Hour)
	st := withProgress(State{Target: "bad", Stable: "good"},
		map[string]time.Time{"a": now.Add(-2 * time.Minute), "b": now.Add(-2 * time.Minute)},
		map[string]string{"a": "CrashLoopBackOff", "b": "CrashLoopBackOff"})
	nodes := []Node{
		on("a", []string{"bad"}, notReady("bad", schema.PhaseCrashLoopBackOff)),
		on("b", []string{"bad"}, notReady("bad", schema.PhaseCrashLoopBackOff)),
		on("c", []string{"good"}, ready("good")),
	}
	d := Step(now, s, st, nodes)
	assert.True(t, d.State.Paused)
	assert.Equal(t, []string{"good"}, d.Assign["c"], "a paused rollout moves nothing")
	assert.Equal(t, 2, d.Status.Failed)

	s.AutoRollback = true
	d = Step(now, s, st, nodes)
	assert.Equal(t, "good", d.State.Target)
	assert.Equal(t, "bad", d.State.RolledBackFrom)
	assert.Equal(t, []string{"good"}, d.Assign["a"], "failed nodes roll back without spending budget")
	assert.Equal(t, []string{"good"}, d.Assign["b"])
	reasons := []string{}
	for _, e := range d.Events {
		reasons = append(reasons, e.Reason)
	}
	assert.Contains(t, reasons, ReasonRollback)
	assert.Contains(t, reasons, ReasonPaused)
}

func TestStepCanaryAutoPromote(t *testing.T) {
	s := Strategy{MaxUnavailable: schema.FromInt(5), CanaryNodes: ptr(schema.FromInt(1)), CanaryAutoPromote: time.Minute}
	nodes := []Node{on("a", []string{"new"}, ready("new")), on("b", []string{"old"}, ready("old"))}
	d := Step(t0.Add(time.Hour), s, State{Target: "new"}, nodes)
	assert.True(t, d.Status.CanaryWaiting)
	assert.Equal(t, []string{"old"}, d.Assign["b"])

	d = Step(t0.Add(time.Hour+2*time.Minute), s, d.State, nodes)
	assert.True(t, d.State.CanaryPromoted)
	d = Step(t0.Add(time.Hour+2*time.Minute), s, d.State, nodes)
	assert.Equal(t, []string{"new"}, d.Assign["b"])
}

func TestFromSpecDefaults(t *testing.T) {
	spec := &schema.DaemonSetSpec{MinReadySeconds: 5}
	s := FromSpec(spec, time.Minute)
	assert.Equal(t, schema.FromInt(1), s.MaxUnavailable)
	assert.Equal(t, schema.FromInt(0), s.MaxSurge)
	assert.Equal(t, 5*time.Second, s.MinReady)
	assert.Equal(t, time.Minute, s.OfflineGrace)
	assert.False(t, s.OnDelete)
}

func TestRetarget(t *testing.T) {
	st := State{Target: "a", Stable: "a", Complete: true}
	next := st.Retarget("b")
	assert.Equal(t, State{Target: "b", Stable: "a"}, next)
	assert.Equal(t, next, next.Retarget("b"))

	paused := State{Target: "b", Stable: "a", OperatorPaused: true, Paused: true, PauseReason: "threshold"}
	assert.Equal(t, State{Target: "c", Stable: "a", OperatorPaused: true}, paused.Retarget("c"),
		"an operator's pause holds across a new revision; a failure pause does not")
}

func ptr[T any](v T) *T { return &v }

// TestStepRollsBackACompletedRevisionThatFailsLater: an instance that
// flickers ready between crashes can complete a rollout, which makes its
// revision stable; when it crashes again within its progress deadline and
// its failures cross the threshold, the rollback returns to the stable
// revision before it.
func TestStepRollsBackACompletedRevisionThatFailsLater(t *testing.T) {
	s := Strategy{MaxUnavailable: schema.FromInt(1), ProgressDeadline: time.Minute, FailureThreshold: ptr(schema.FromInt(1)), AutoRollback: true}
	now := t0.Add(time.Hour)
	nodes := []Node{on("a", []string{"bad"}, ready("bad")), on("b", []string{"bad"}, ready("bad"))}
	assigned := now.Add(-30 * time.Second)
	d := Step(now, s, withProgress(State{Target: "bad", Stable: "good"}, map[string]time.Time{"a": assigned, "b": assigned}, nil), nodes)
	require.True(t, d.State.Complete)
	assert.Equal(t, "bad", d.State.Stable)
	assert.Equal(t, "good", d.State.Previous)

	nodes[0].Observed = []Instance{notReady("bad", schema.PhaseCrashLoopBackOff)}
	d = Step(now.Add(20*time.Second), s, d.State, nodes)
	assert.Empty(t, d.State.Failed, "crash-looping within the deadline fails only at the deadline")
	d = Step(now.Add(time.Minute), s, d.State, nodes)
	assert.Equal(t, "good", d.State.Target, "rolled back to the revision before the failing one")
	assert.Equal(t, "bad", d.State.RolledBackFrom)
	assert.Contains(t, d.State.RollbackReason, "failureThreshold 1")
	assert.Contains(t, d.Status.RollbackReason, "failureThreshold 1", "the status says why it rolled back")
	assert.Equal(t, []string{"good"}, d.Assign["a"], "the failed node goes back first")
}

// TestStepRollbackIsNotCanaryGated: a canary gates a new revision, not the
// return to one that completed. The canary slots of a rollback are already
// taken by the nodes that never left the stable revision, so a gated
// rollback left the failed canary broken until autoPromoteSeconds passed
// (or for ever without it, waiting for `rollout promote`).
func TestStepRollbackIsNotCanaryGated(t *testing.T) {
	s := Strategy{MaxUnavailable: schema.FromInt(1), ProgressDeadline: time.Minute, FailureThreshold: ptr(schema.FromInt(1)),
		AutoRollback: true, CanaryNodes: ptr(schema.FromInt(1))}
	now := t0.Add(time.Hour)
	st := withProgress(State{Target: "bad", Stable: "good"}, map[string]time.Time{"a": now.Add(-2 * time.Minute)},
		map[string]string{"a": "ImagePullBackOff"})
	nodes := []Node{
		on("a", []string{"bad"}, notReady("bad", schema.PhaseImagePullBackOff)),
		on("b", []string{"good"}, ready("good")),
		on("c", []string{"good"}, ready("good")),
	}
	d := Step(now, s, st, nodes)
	require.Equal(t, "good", d.State.Target, "rolled back")
	assert.Equal(t, []string{"good"}, d.Assign["a"], "the failed canary goes back at once")
	assert.False(t, d.Status.CanaryWaiting, "a rollback waits for no promotion")
}
