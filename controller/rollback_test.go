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

// failurePolicy pauses on the first failed instance of a rollout and rolls
// back; the progress deadline is one second.
const failurePolicy = "  rollout: {progressDeadlineSeconds: 1, failureThreshold: 1, autoRollback: true}\n"

func eventReasons(t *testing.T, tc *testController) []string {
	t.Helper()
	events, err := tc.api.Events(context.Background(), api.EventFilter{Object: "daemonset/" + exporter})
	require.NoError(t, err)
	var reasons []string
	for _, e := range events {
		reasons = append(reasons, e.Reason)
	}
	return reasons
}

// waitPastDeadlines waits until the progress deadline of every node the
// current rollout updated has passed: the rollout is long over.
func waitPastDeadlines(t *testing.T, tc *testController, deadline time.Duration) {
	t.Helper()
	checkfor.Eventually(t, wait, 25*time.Millisecond, func() error {
		st, _, _, err := loadRollout(tc.store, exporter)
		if err != nil {
			return err
		}
		assigned := 0
		for _, node := range st.EntryNodes() {
			at, ok := st.AssignedAt(node)
			if !ok {
				continue
			}
			assigned++
			if time.Since(at) <= deadline {
				return fmt.Errorf("node %s is within its progress deadline", node)
			}
		}
		if assigned == 0 {
			return fmt.Errorf("no node assigned yet")
		}
		return nil
	})
}

// reportAs makes the node report its last desired state as behave says.
func (n *fakeNode) reportAs(behave func(schema.DesiredState) schema.ObservedState) {
	n.setBehaviourWhenPlaced(behave)
	d, ok := n.lastDesired()
	require.True(n.t, ok, "node %s has no desired state", n.name)
	n.report(behave(d))
}

func availableNodes(want int) func(api.DaemonSet) error {
	return func(ds api.DaemonSet) error {
		if ds.Status.NumberAvailable != want {
			return fmt.Errorf("want %d available, got %+v", want, ds.Status)
		}
		return nil
	}
}

// TestCrashAfterCompletedRolloutDoesNotPause: an instance that crashes long
// after its rollout completed is the restart policy's business (an
// InstanceFailed event), not a failed rollout: no RolloutInstanceFailed,
// no pause, no rollback.
func TestCrashAfterCompletedRolloutDoesNotPause(t *testing.T) {
	tc := startController(t, Config{})
	nodes := fleet(t, tc, 2, healthy())
	tc.applyYAML(t, exporterManifest("edgeset.io/v1", "exporter:1", rollingOne, failurePolicy))
	waitRollout(t, tc, complete(""))
	tc.applyYAML(t, exporterManifest("edgeset.io/v1", "exporter:2", rollingOne, failurePolicy))
	v2 := waitRollout(t, tc, complete("")).CurrentHash
	waitPastDeadlines(t, tc, time.Second)

	nodes[0].reportAs(healthy(v2)) // its v2 instance now crash-loops
	ds := waitRollout(t, tc, func(ds api.DaemonSet) error {
		if r := ds.Status.Rollout; r.Paused || r.RolledBack {
			return nil // the fault this test defends against
		}
		return availableNodes(1)(ds)
	})
	r := ds.Status.Rollout
	assert.False(t, r.Paused, "pause reason: %s", r.PauseReason)
	assert.False(t, r.RolledBack)
	assert.Zero(t, r.Failed)
	assert.Equal(t, v2, ds.CurrentHash)
	// Events are stored behind the status: wait for the instance's.
	var reasons []string
	checkfor.Eventually(t, 5*time.Second, 20*time.Millisecond, func() error {
		if reasons = eventReasons(t, tc); !slices.Contains(reasons, "InstanceFailed") {
			return fmt.Errorf("the crash is not reported as the instance's: events %v", reasons)
		}
		return nil
	})
	assert.NotContains(t, reasons, rollout.ReasonInstanceFailed)
	assert.NotContains(t, reasons, rollout.ReasonPaused)
	for _, n := range nodes {
		assert.Equal(t, []string{v2}, n.revisions())
	}
}

// TestReconnectDoesNotFailRollout: a node that reconnects after its
// rollout completed, and first reports its instance starting, does not
// fire RolloutInstanceFailed.
func TestReconnectDoesNotFailRollout(t *testing.T) {
	tc := startController(t, Config{})
	nodes := fleet(t, tc, 2, healthy())
	tc.applyYAML(t, exporterManifest("edgeset.io/v1", "exporter:1", rollingOne, failurePolicy))
	v1 := waitRollout(t, tc, complete("")).CurrentHash
	waitPastDeadlines(t, tc, time.Second)

	nodes[0].goOffline()
	back := startNode(t, tc.brokerURL(), tc.secret, gateway(nodes[0].name, nil))
	starting := func(d schema.DesiredState) schema.ObservedState {
		obs := schema.ObservedState{ObservedGeneration: d.Generation}
		for _, in := range d.Instances {
			obs.Instances = append(obs.Instances, schema.InstanceStatus{DaemonSet: in.DaemonSet, Revision: in.Revision, Phase: schema.PhasePending})
		}
		return obs
	}
	back.setBehaviourWhenPlaced(starting)
	checkfor.Eventually(t, wait, 25*time.Millisecond, func() error {
		if _, ok := back.lastDesired(); !ok {
			return fmt.Errorf("the returning node has no desired state yet")
		}
		return nil
	})
	back.reportAs(starting)
	checkfor.Eventually(t, wait, 25*time.Millisecond, func() error {
		ds, err := tc.api.GetDaemonSet(context.Background(), exporter)
		if err != nil {
			return err
		}
		i := slices.IndexFunc(ds.Instances, func(in api.Instance) bool { return in.Node == back.name })
		if i < 0 || !ds.Instances[i].Online || ds.Instances[i].Phase != schema.PhasePending || ds.Status.NumberAvailable != 1 {
			return fmt.Errorf("want %s back online and Pending: %+v", back.name, ds.Instances)
		}
		return nil
	})
	back.reportAs(healthy())
	ds := waitRollout(t, tc, availableNodes(2))
	assert.False(t, ds.Status.Rollout.Paused, "pause reason: %s", ds.Status.Rollout.PauseReason)
	assert.Equal(t, v1, ds.CurrentHash)
	assert.NotContains(t, eventReasons(t, tc), rollout.ReasonInstanceFailed)
}

// TestRollbackShowsWhatRuns: after an automatic rollback the live object is
// the template that runs, its status names the rejected revision and why,
// re-applying the rejected manifest says it was rolled back (and changes
// nothing), and rollout retry rolls it out again.
func TestRollbackShowsWhatRuns(t *testing.T) {
	tc := startController(t, Config{})
	var badMu sync.Mutex // the nodes' handlers read bad on their own goroutines
	var bad []string
	behave := func(d schema.DesiredState) schema.ObservedState {
		badMu.Lock()
		defer badMu.Unlock()
		return healthy(bad...)(d)
	}
	setBad := func(hashes ...string) {
		badMu.Lock()
		bad = hashes
		badMu.Unlock()
	}
	fleet(t, tc, 3, behave)
	tc.applyYAML(t, exporterManifest("edgeset.io/v1", "exporter:1", rollingOne, failurePolicy))
	ds := waitRollout(t, tc, complete(""))
	v1, gen1 := ds.CurrentHash, ds.Generation

	broken := exporterManifest("edgeset.io/v1", "exporter:broken", rollingOne, failurePolicy)
	tc.applyYAML(t, broken)
	hist, err := tc.api.RolloutHistory(context.Background(), exporter)
	require.NoError(t, err)
	badHash := hist[len(hist)-1].Hash
	setBad(badHash)
	ds = waitRollout(t, tc, func(ds api.DaemonSet) error {
		if r := ds.Status.Rollout; r == nil || !r.RolledBack || !r.Complete || ds.CurrentHash != v1 {
			return fmt.Errorf("want a completed rollback to %s: current %s, %+v", v1, ds.CurrentHash, r)
		}
		return nil
	})

	assert.Equal(t, "exporter:1", ds.Manifest.Spec.Template.Spec.Containers[0].Image, "the live template is what runs")
	assert.Greater(t, ds.Generation, gen1+1, "the rollback changed the spec")
	require.NotNil(t, ds.Status.RejectedRevision)
	assert.Equal(t, badHash, ds.Status.RejectedRevision.Hash)
	assert.Equal(t, hist[len(hist)-1].Number, ds.Status.RejectedRevision.Revision)
	assert.Contains(t, ds.Status.RejectedRevision.Reason, "failureThreshold")
	assert.Contains(t, ds.Status.Rollout.RollbackReason, "failureThreshold")

	for _, dry := range []bool{true, false} {
		res, err := tc.api.Apply(context.Background(), "bad.yaml", []byte(broken), dry)
		require.NoError(t, err)
		assert.Equal(t, api.ActionRolledBack, res[0].Action, "dry run %v", dry)
		assert.Contains(t, res[0].Message, "edgesetctl rollout retry daemonset exporter -n monitoring")
		assert.Contains(t, res[0].Message, "failureThreshold")
	}
	after, err := tc.api.GetDaemonSet(context.Background(), exporter)
	require.NoError(t, err)
	assert.Equal(t, v1, after.CurrentHash, "re-applying the rejected manifest rolls nothing out")
	assert.Equal(t, ds.Generation, after.Generation)
	assert.Equal(t, "exporter:1", after.Manifest.Spec.Template.Spec.Containers[0].Image)

	// An apply of the template that runs is unchanged.
	res := tc.applyYAML(t, exporterManifest("edgeset.io/v1", "exporter:1", rollingOne, failurePolicy))
	assert.Equal(t, api.ActionUnchanged, res[0].Action)

	setBad()
	retried, err := tc.api.Rollout(context.Background(), exporter, api.RolloutRequest{Action: api.RolloutRetry})
	require.NoError(t, err)
	assert.Equal(t, badHash, retried.CurrentHash)
	assert.Nil(t, retried.Status.RejectedRevision)
	assert.Equal(t, "exporter:broken", retried.Manifest.Spec.Template.Spec.Containers[0].Image)
	waitRollout(t, tc, complete(badHash))

	_, err = tc.api.Rollout(context.Background(), exporter, api.RolloutRequest{Action: api.RolloutRetry})
	require.ErrorIs(t, err, api.ErrInvalid, "nothing rejected to retry")
}
