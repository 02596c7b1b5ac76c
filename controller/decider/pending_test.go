package decider

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestCommitLeavesNothingToDecide: Commit may leave the decider Pending
// (a tracker whose facts a published assignment changed asks for a
// step), yet the controller schedules no pass for it: the decision's
// RequeueAt was computed before the commit. That is safe only while such
// a decision changes nothing: no desired state, no rollout state, no
// event, the same status. Over random event sequences, it holds.
func TestCommitLeavesNothingToDecide(t *testing.T) {
	forSeeds(t, nil, commitLeavesNothing)
}

func commitLeavesNothing(t *testing.T, seed uint64, steps int) {
	walk(t, seed, steps, func(where string, w *world, inc *Decider) {
		w.apply(inc, inc.Decide(w.now))
		settle(t, where, w, inc)
		if !inc.Pending() {
			return
		}
		before := inc.Status()
		d := inc.Decide(w.now)
		require.Empty(t, d.Desired, "%s: desired", where)
		require.Empty(t, d.Forget, "%s: forget", where)
		for key, ro := range d.Rollouts {
			require.False(t, ro.StateChanged, "%s: %s: rollout state changed", where, key)
			require.Empty(t, ro.Events, "%s: %s: rollout events", where, key)
		}
		require.Equal(t, before, inc.Status(), "%s: status", where)
		w.apply(inc, d)
	})
}
