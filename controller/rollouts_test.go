package controller

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgeset/edgeset/controller/api"
	"github.com/edgeset/edgeset/internal/checkfor"
	"github.com/edgeset/edgeset/schema"
)

func exporterManifest(apiVersion, image, strategy, rollout string) string {
	return fmt.Sprintf(`apiVersion: %s
kind: DaemonSet
metadata: {name: exporter, namespace: monitoring}
spec:
  selector: {matchLabels: {app: exporter}}
  updateStrategy: %s
%s  template:
    metadata: {labels: {app: exporter}}
    spec:
      containers:
      - {name: exporter, image: "%s"}
`, apiVersion, strategy, rollout, image)
}

const rollingOne = "{type: RollingUpdate, rollingUpdate: {maxUnavailable: 1}}"

// fleet starts n healthy fake nodes.
func fleet(t *testing.T, tc *testController, n int, behave func(schema.DesiredState) schema.ObservedState) []*fakeNode {
	nodes := make([]*fakeNode, n)
	for i := range nodes {
		nodes[i] = startNode(t, tc.brokerURL(), tc.secret, gateway(fmt.Sprintf("gw-%d", i), nil))
		nodes[i].setBehaviourWhenPlaced(behave)
	}
	return nodes
}

// setBehaviourWhenPlaced waits for a first desired state, then behaves.
func (n *fakeNode) setBehaviourWhenPlaced(behave func(schema.DesiredState) schema.ObservedState) {
	n.mu.Lock()
	n.behave = behave
	n.mu.Unlock()
}

// revisionOf returns the revision hashes the node is asked to run.
func (n *fakeNode) revisions() []string {
	d, _ := n.lastDesired()
	var out []string
	for _, in := range d.Instances {
		out = append(out, in.Revision)
	}
	return out
}

func waitRollout(t *testing.T, tc *testController, cond func(api.DaemonSet) error) api.DaemonSet {
	t.Helper()
	var ds api.DaemonSet
	checkfor.Eventually(t, wait, 25*time.Millisecond, func() error {
		var err error
		if ds, err = tc.api.GetDaemonSet(context.Background(), exporter); err != nil {
			return err
		}
		return cond(ds)
	})
	return ds
}

func complete(hash string) func(api.DaemonSet) error {
	return func(ds api.DaemonSet) error {
		r := ds.Status.Rollout
		if r == nil || !r.Complete || r.Target != ds.CurrentHash || ds.CurrentHash != hash && hash != "" || ds.Status.UpdatedNumberScheduled != ds.Status.DesiredNumberScheduled {
			return fmt.Errorf("rollout not complete: %+v, status %+v", r, ds.Status)
		}
		return nil
	}
}

func TestRollingUpdateAndUndo(t *testing.T) {
	tc := startController(t, Config{})
	nodes := fleet(t, tc, 4, healthy())
	tc.applyYAML(t, exporterManifest("apps/v1", "exporter:1", rollingOne, ""))
	v1 := waitRollout(t, tc, complete("")).CurrentHash

	tc.applyYAML(t, exporterManifest("apps/v1", "exporter:2", rollingOne, ""))
	v2 := waitRollout(t, tc, complete("")).CurrentHash
	require.NotEqual(t, v1, v2)
	for _, n := range nodes {
		assert.Equal(t, []string{v2}, n.revisions())
	}
	hist, err := tc.api.RolloutHistory(context.Background(), exporter)
	require.NoError(t, err)
	require.Len(t, hist, 2)
	assert.True(t, hist[1].Current)
	assert.Equal(t, 4, hist[1].Nodes)
	assert.Equal(t, []string{"exporter:2"}, hist[1].Images)

	_, err = tc.api.Rollout(context.Background(), exporter, api.RolloutRequest{Action: api.RolloutUndo})
	require.NoError(t, err)
	waitRollout(t, tc, complete(v1))
	for _, n := range nodes {
		assert.Equal(t, []string{v1}, n.revisions())
	}
}

func TestOnDeleteMovesOnlyDeletedInstances(t *testing.T) {
	tc := startController(t, Config{})
	nodes := fleet(t, tc, 3, healthy())
	tc.applyYAML(t, exporterManifest("apps/v1", "exporter:1", "{type: OnDelete}", ""))
	v1 := waitRollout(t, tc, complete("")).CurrentHash
	tc.applyYAML(t, exporterManifest("apps/v1", "exporter:2", "{type: OnDelete}", ""))
	ds := waitRollout(t, tc, func(ds api.DaemonSet) error {
		if ds.Status.Rollout == nil || ds.Status.Rollout.Waiting != 3 {
			return fmt.Errorf("want 3 nodes behind, got %+v", ds.Status.Rollout)
		}
		return nil
	})
	v2 := ds.CurrentHash
	for _, n := range nodes {
		assert.Equal(t, []string{v1}, n.revisions(), "OnDelete moves nothing by itself")
	}
	require.NoError(t, tc.api.DeleteInstance(context.Background(), exporter, "gw-1"))
	checkfor.Eventually(t, wait, 25*time.Millisecond, func() error {
		if got := nodes[1].revisions(); len(got) != 1 || got[0] != v2 {
			return fmt.Errorf("gw-1 runs %v, want %s", got, v2)
		}
		return nil
	})
	assert.Equal(t, []string{v1}, nodes[0].revisions())
	assert.Equal(t, []string{v1}, nodes[2].revisions())
	waitRollout(t, tc, func(ds api.DaemonSet) error {
		if ds.Status.Rollout.Waiting != 2 || ds.Status.Rollout.Updated != 1 {
			return fmt.Errorf("want 1 updated, 2 behind: %+v", ds.Status.Rollout)
		}
		return nil
	})
}

func TestPauseAndResume(t *testing.T) {
	tc := startController(t, Config{})
	nodes := fleet(t, tc, 3, healthy())
	tc.applyYAML(t, exporterManifest("apps/v1", "exporter:1", rollingOne, ""))
	v1 := waitRollout(t, tc, complete("")).CurrentHash
	_, err := tc.api.Rollout(context.Background(), exporter, api.RolloutRequest{Action: api.RolloutPause})
	require.NoError(t, err)
	tc.applyYAML(t, exporterManifest("apps/v1", "exporter:2", rollingOne, ""))
	ds := waitRollout(t, tc, func(ds api.DaemonSet) error {
		if ds.Status.Rollout == nil || !ds.Status.Rollout.Paused || ds.Status.Rollout.Target != ds.CurrentHash {
			return fmt.Errorf("want a paused rollout of the new revision: %+v", ds.Status.Rollout)
		}
		return nil
	})
	_ = ds
	for _, n := range nodes {
		assert.Equal(t, []string{v1}, n.revisions(), "a paused rollout moves nothing")
	}
	_, err = tc.api.Rollout(context.Background(), exporter, api.RolloutRequest{Action: api.RolloutResume})
	require.NoError(t, err)
	waitRollout(t, tc, complete(""))
}

func TestBadRevisionRollsBackAutomatically(t *testing.T) {
	tc := startController(t, Config{})
	policy := "  rollout: {progressDeadlineSeconds: 1, failureThreshold: 1, autoRollback: true}\n"
	tc.applyYAML(t, exporterManifest("edgeset.io/v1", "exporter:1", rollingOne, policy))
	var badMu sync.Mutex // the nodes' handlers read bad on their own goroutines
	var bad []string
	behave := func(d schema.DesiredState) schema.ObservedState {
		badMu.Lock()
		defer badMu.Unlock()
		return healthy(bad...)(d)
	}
	nodes := fleet(t, tc, 3, behave)
	v1 := waitRollout(t, tc, complete("")).CurrentHash

	// The next revision crash-loops everywhere.
	res := tc.applyYAML(t, exporterManifest("edgeset.io/v1", "exporter:broken", rollingOne, policy))
	require.Equal(t, api.ActionConfigured, res[0].Action)
	hist, err := tc.api.RolloutHistory(context.Background(), exporter)
	require.NoError(t, err)
	badMu.Lock()
	bad = []string{hist[len(hist)-1].Hash}
	badMu.Unlock()
	ds := waitRollout(t, tc, func(ds api.DaemonSet) error {
		r := ds.Status.Rollout
		if r == nil || !r.RolledBack || !r.Complete || ds.CurrentHash != v1 {
			return fmt.Errorf("want a completed rollback to %s: current %s, %+v", v1, ds.CurrentHash, r)
		}
		return nil
	})
	assert.Equal(t, hist[len(hist)-1].Hash, ds.Status.Rollout.RolledBackFrom)
	for _, n := range nodes {
		assert.Equal(t, []string{v1}, n.revisions())
	}
	// Events are stored by the event sink on its own goroutine: the
	// rollback's may land after the rollout state shows it.
	checkfor.Eventually(t, wait, 20*time.Millisecond, func() error {
		events, err := tc.api.Events(context.Background(), api.EventFilter{Object: "daemonset/" + exporter})
		if err != nil {
			return err
		}
		var reasons []string
		for _, e := range events {
			reasons = append(reasons, e.Reason)
		}
		if !strings.Contains(strings.Join(reasons, ","), "RolloutRollback") {
			return fmt.Errorf("no RolloutRollback event among %v", reasons)
		}
		return nil
	})
}

func TestRolloutActionErrors(t *testing.T) {
	tc := startController(t, Config{})
	fleet(t, tc, 1, healthy())
	tc.applyYAML(t, exporterManifest("apps/v1", "exporter:1", rollingOne, ""))
	waitRollout(t, tc, complete(""))
	ctx := context.Background()
	_, err := tc.api.Rollout(ctx, exporter, api.RolloutRequest{Action: "explode"})
	require.ErrorIs(t, err, api.ErrInvalid)
	_, err = tc.api.Rollout(ctx, exporter, api.RolloutRequest{Action: api.RolloutUndo})
	require.ErrorIs(t, err, api.ErrInvalid, "no earlier revision")
	_, err = tc.api.Rollout(ctx, exporter, api.RolloutRequest{Action: api.RolloutPromote})
	require.ErrorIs(t, err, api.ErrInvalid, "no canary")
	_, err = tc.api.Rollout(ctx, "monitoring/nope", api.RolloutRequest{Action: api.RolloutPause})
	require.ErrorIs(t, err, api.ErrNotFound)
	require.ErrorIs(t, tc.api.DeleteInstance(ctx, exporter, "nowhere"), api.ErrNotFound)

	_, err = tc.api.Rollout(ctx, exporter, api.RolloutRequest{Action: api.RolloutRestart})
	require.NoError(t, err)
	hist, err := tc.api.RolloutHistory(ctx, exporter)
	require.NoError(t, err)
	require.Len(t, hist, 2, "restart makes a new revision of the same template")
	assert.Equal(t, "rollout restart", hist[1].ChangeCause)
}

func TestRevisionHistoryLimitPrunes(t *testing.T) {
	tc := startController(t, Config{})
	fleet(t, tc, 2, healthy())
	withLimit := func(image string) string {
		return strings.Replace(exporterManifest("apps/v1", image, rollingOne, ""), "spec:\n", "spec:\n  revisionHistoryLimit: 1\n", 1)
	}
	for i := 1; i <= 4; i++ {
		tc.applyYAML(t, withLimit(fmt.Sprintf("exporter:%d", i)))
		waitRollout(t, tc, complete(""))
	}
	hist, err := tc.api.RolloutHistory(context.Background(), exporter)
	require.NoError(t, err)
	var numbers []int64
	for _, r := range hist {
		numbers = append(numbers, r.Number)
	}
	assert.Equal(t, []int64{2, 3, 4}, numbers,
		"revision 1 is pruned; 3 (the stable one a rollback returns to) and one more old revision are kept")
}
