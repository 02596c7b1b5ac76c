package rollout

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgeset/edgeset/schema"
)

// step is one pass of a failure-counting case: at t0+at, the nodes report
// observed.
type step struct {
	at    time.Duration
	nodes []Node
}

func crashing(rev string) Instance { return notReady(rev, schema.PhaseCrashLoopBackOff) }

func away(name string, assigned []string, observed ...Instance) Node {
	n := on(name, assigned, observed...)
	n.Online = false
	return n
}

// TestStepFailureCounting: only instances the current rollout updated, and
// only what they do within its progress deadline (or, with no deadline,
// before they were first available), count against the failure threshold.
// Later crashes, and nodes that disconnect and return, are the restart
// policy's business.
func TestStepFailureCounting(t *testing.T) {
	deadline := Strategy{MaxUnavailable: schema.FromInt(1), ProgressDeadline: time.Minute, FailureThreshold: ptr(schema.FromInt(1))}
	noDeadline := deadline
	noDeadline.ProgressDeadline = 0
	// Node b is assigned "new" at t0 (it ran nothing).
	assigned := State{Target: "new", Stable: "old"}
	tests := []struct {
		name       string
		strategy   Strategy
		steps      []step
		wantFailed []string
	}{
		{
			name:     "a crash long after a completed rollout does not count",
			strategy: deadline,
			steps: []step{
				{0, []Node{on("a", []string{"old"}, ready("old")), on("b", nil)}},
				{10 * time.Second, []Node{on("a", []string{"old"}, ready("old")), on("b", []string{"new"}, ready("new"))}},
				{20 * time.Second, []Node{on("a", []string{"new"}, ready("new")), on("b", []string{"new"}, ready("new"))}},
				{2 * time.Minute, []Node{on("a", []string{"new"}, ready("new")), on("b", []string{"new"}, ready("new"))}},
				{time.Hour, []Node{on("a", []string{"new"}, crashing("new")), on("b", []string{"new"}, ready("new"))}},
			},
		},
		{
			name:     "a terminal phase after the deadline does not count",
			strategy: deadline,
			steps: []step{
				{0, []Node{on("b", nil)}},
				{10 * time.Second, []Node{on("b", []string{"new"}, ready("new"))}},
				{time.Hour, []Node{on("b", []string{"new"}, notReady("new", schema.PhaseFailed))}},
			},
		},
		{
			name:     "a crash first seen after the deadline does not count, even with no pass at the deadline",
			strategy: deadline,
			steps: []step{
				{0, []Node{on("b", nil)}},
				{10 * time.Second, []Node{on("b", []string{"new"}, ready("new"))}},
				{time.Hour, []Node{on("b", []string{"new"}, crashing("new"))}},
			},
		},
		{
			name:     "not available by the deadline counts",
			strategy: deadline,
			steps: []step{
				{0, []Node{on("b", nil)}},
				{10 * time.Second, []Node{on("b", []string{"new"}, notReady("new", schema.PhasePulling))}},
				{time.Minute, []Node{on("b", []string{"new"}, notReady("new", schema.PhasePulling))}},
			},
			wantFailed: []string{"b"},
		},
		{
			name:     "ready, then crash-looping within the deadline counts (a flicker)",
			strategy: deadline,
			steps: []step{
				{0, []Node{on("b", nil)}},
				{10 * time.Second, []Node{on("b", []string{"new"}, ready("new"))}},
				{30 * time.Second, []Node{on("b", []string{"new"}, crashing("new"))}},
				{time.Minute, []Node{on("b", []string{"new"}, crashing("new"))}},
			},
			wantFailed: []string{"b"},
		},
		{
			name:     "a terminal phase within the deadline counts at once",
			strategy: deadline,
			steps: []step{
				{0, []Node{on("b", nil)}},
				{10 * time.Second, []Node{on("b", []string{"new"}, notReady("new", schema.PhaseRefused))}},
			},
			wantFailed: []string{"b"},
		},
		{
			name:     "no deadline: a terminal phase before the first availability counts",
			strategy: noDeadline,
			steps: []step{
				{0, []Node{on("b", nil)}},
				{time.Hour, []Node{on("b", []string{"new"}, notReady("new", schema.PhaseFailed))}},
			},
			wantFailed: []string{"b"},
		},
		{
			name:     "no deadline: a terminal phase after the first availability does not count",
			strategy: noDeadline,
			steps: []step{
				{0, []Node{on("b", nil)}},
				{10 * time.Second, []Node{on("b", []string{"new"}, ready("new"))}},
				{time.Hour, []Node{on("b", []string{"new"}, notReady("new", schema.PhaseFailed))}},
			},
		},
		{
			name:     "an instance this rollout did not update does not count",
			strategy: deadline,
			steps: []step{
				{0, []Node{on("a", []string{"new"}, ready("new"))}},
				{time.Hour, []Node{on("a", []string{"new"}, notReady("new", schema.PhaseFailed))}},
			},
		},
		{
			name:     "a node that reconnects is not judged on its first reports",
			strategy: deadline,
			steps: []step{
				{0, []Node{on("b", nil)}},
				{10 * time.Second, []Node{on("b", []string{"new"}, ready("new"))}},
				{2 * time.Minute, []Node{away("b", []string{"new"}, ready("new"))}},
				{time.Hour, []Node{on("b", []string{"new"}, notReady("new", schema.PhasePending))}},
				{time.Hour + time.Second, []Node{on("b", []string{"new"}, ready("new"))}},
			},
		},
		{
			name:     "a node that disconnects within its deadline gets a new one from its return",
			strategy: deadline,
			steps: []step{
				{0, []Node{on("b", nil)}},
				{10 * time.Second, []Node{away("b", []string{"new"}, notReady("new", schema.PhasePulling))}},
				{time.Hour, []Node{on("b", []string{"new"}, notReady("new", schema.PhasePulling))}},
				{time.Hour + 30*time.Second, []Node{on("b", []string{"new"}, ready("new"))}},
				{2 * time.Hour, []Node{on("b", []string{"new"}, crashing("new"))}},
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st := assigned
			var d Decision
			for _, s := range tc.steps {
				d = Step(t0.Add(s.at), tc.strategy, st, s.nodes)
				st = d.State
			}
			var failed []string
			for node := range d.State.Failed {
				failed = append(failed, node)
			}
			assert.ElementsMatch(t, tc.wantFailed, failed)
			var reasons []string
			for _, e := range d.Events {
				reasons = append(reasons, e.Reason)
			}
			if len(tc.wantFailed) == 0 {
				assert.False(t, d.State.Paused, "paused: %s", d.State.PauseReason)
				assert.NotContains(t, reasons, ReasonInstanceFailed)
			} else {
				assert.True(t, d.State.Paused, "failureThreshold 1 is crossed")
			}
		})
	}
}

// TestStepNoFailureAfterTheWindowProperty: whatever a fleet's instances do
// once every node's progress window has closed (crash, flap offline and
// back, report Pending, Failed), the rollout records no failure, does not
// pause and does not roll back.
func TestStepNoFailureAfterTheWindowProperty(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 18))
	phases := []string{schema.PhaseCrashLoopBackOff, schema.PhaseFailed, schema.PhasePending, schema.PhaseRefused, schema.PhaseRunning}
	for run := range 200 {
		s := Strategy{MaxUnavailable: schema.FromInt(int32(1 + rng.IntN(3))), ProgressDeadline: time.Duration(rng.IntN(2)) * time.Minute,
			FailureThreshold: ptr(schema.FromInt(1)), AutoRollback: true, OfflineGrace: time.Minute}
		n := 1 + rng.IntN(8)
		nodes := make([]Node, n)
		for i := range nodes {
			nodes[i] = on(fmt.Sprintf("n%d", i), nil)
		}
		st, now := State{Target: "new", Stable: "old"}, t0
		for range 4 * n { // roll out to every node, each available at once
			d := Step(now, s, st, nodes)
			st = d.State
			for i := range nodes {
				nodes[i].Assigned = d.Assign[nodes[i].Name]
				nodes[i].Observed = []Instance{ready(d.Assign[nodes[i].Name][0])}
			}
			now = now.Add(10 * time.Second)
		}
		require.True(t, st.Complete, "run %d: the rollout completes", run)
		now = now.Add(2 * time.Minute) // every window has closed
		for step := range 20 {
			for i := range nodes {
				nodes[i].Online = rng.IntN(4) > 0
				nodes[i].OfflineSince = time.Time{}
				if !nodes[i].Online {
					nodes[i].OfflineSince = now.Add(-time.Duration(rng.IntN(120)) * time.Second)
				}
				phase := phases[rng.IntN(len(phases))]
				nodes[i].Observed = []Instance{{Revision: "new", Phase: phase, Ready: phase == schema.PhaseRunning, ReadySince: t0}}
			}
			d := Step(now, s, st, nodes)
			st = d.State
			for _, e := range d.Events {
				require.NotEqual(t, ReasonInstanceFailed, e.Reason, "run %d step %d: %s", run, step, e.Message)
			}
			require.Empty(t, st.Failed, "run %d step %d", run, step)
			require.False(t, st.Paused, "run %d step %d", run, step)
			require.Equal(t, "new", st.Target, "run %d step %d: no rollback", run, step)
			now = now.Add(time.Duration(1+rng.IntN(90)) * time.Second)
		}
	}
}
