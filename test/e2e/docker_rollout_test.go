package e2e

import (
	"errors"
	"fmt"
	"testing"

	"github.com/moby/moby/api/types/container"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgeset/edgeset/controller/api"
	"github.com/edgeset/edgeset/internal/checkfor"
	"github.com/edgeset/edgeset/test/testimage"
)

// Update strategies of the two daemonsets, as YAML flow mappings.
const (
	rollingStrategy  = "{type: RollingUpdate, rollingUpdate: {maxUnavailable: 1}}"
	onDeleteStrategy = "{type: OnDelete}"
)

// TestDockerRollout moves two daemonsets from image A (the test image) to
// image B (the same image under a second tag) on three agents sharing this
// machine's Docker engine: one by rolling update, one on delete.
func TestDockerRollout(t *testing.T) {
	cli := testimage.RequireDocker(t)
	imageA := testimage.Build(t)
	imageB := tagImage(t, cli, imageA) // untagged after the containers are gone
	f := startFleet(t, cli, 3)

	t.Run("RollingUpdate", func(t *testing.T) { testRollingUpdate(t, f, imageA, imageB) })
	t.Run("OnDelete", func(t *testing.T) { testOnDelete(t, f, imageA, imageB) })
}

// testRollingUpdate rolls e2e/rolling from imageA to imageB with
// maxUnavailable 1, sampling the engine throughout: never more than one
// node without a running instance, never two containers on one node.
func testRollingUpdate(t *testing.T, f *fleet, imageA, imageB string) {
	const key = "e2e/rolling"
	res := f.apply(t, manifest("rolling", imageA, rollingStrategy))
	require.Equal(t, api.ActionCreated, res.Action)
	first := f.waitConverged(t, key, imageA)

	res = f.apply(t, manifest("rolling", imageB, rollingStrategy))
	require.Equal(t, api.ActionConfigured, res.Action)
	samples, degraded := 0, 0
	checkfor.Eventually(t, wait, poll, func() error {
		samples++
		snap := f.containersOf(t, key)
		if f.requireRollingBudget(t, snap, imageA, imageB) {
			degraded++
		}
		ds := f.daemonSet(t, key)
		if ro := ds.Status.Rollout; ro != nil && ro.Unavailable > 1 {
			t.Fatalf("controller reports %d unavailable nodes, maxUnavailable is 1: %+v", ro.Unavailable, *ro)
		}
		if ds.CurrentHash == first.CurrentHash {
			return errors.New("controller still at the first revision")
		}
		return f.converged(snap, ds, imageB)
	})
	t.Logf("rolling update sampled %d times, %d with one node down", samples, degraded)

	hist, err := f.api.RolloutHistory(t.Context(), key)
	require.NoError(t, err)
	require.Len(t, hist, 2)
	assert.Equal(t, []string{imageA}, hist[0].Images)
	assert.Equal(t, []string{imageB}, hist[1].Images)
	assert.True(t, hist[1].Current)
	assert.Equal(t, f.daemonSet(t, key).CurrentHash, hist[1].Hash)
}

// requireRollingBudget fails the test if snap has a node with two
// containers of the daemonset, or more than one node without a running
// container of imageA or imageB. It reports whether one node was without.
func (f *fleet) requireRollingBudget(t *testing.T, snap snapshot, imageA, imageB string) bool {
	t.Helper()
	var down []string
	for _, n := range f.nodes {
		list := snap[n]
		if len(list) > 1 {
			t.Fatalf("node %s has %d containers of the daemonset at once: %s", n, len(list), snap.describe(n))
		}
		if len(list) == 0 || list[0].State != container.StateRunning || list[0].Image != imageA && list[0].Image != imageB {
			down = append(down, n+" "+snap.describe(n))
		}
	}
	if len(down) > 1 {
		t.Fatalf("%d nodes without a running instance at once, maxUnavailable is 1: %v", len(down), down)
	}
	return len(down) == 1
}

// testOnDelete changes e2e/ondelete from imageA to imageB: no node moves
// until its instance is deleted, then only that node runs imageB.
func testOnDelete(t *testing.T, f *fleet, imageA, imageB string) {
	const key = "e2e/ondelete"
	res := f.apply(t, manifest("ondelete", imageA, onDeleteStrategy))
	require.Equal(t, api.ActionCreated, res.Action)
	first := f.waitConverged(t, key, imageA)
	pinned := f.containersOf(t, key).ids()
	rolling := f.containersOf(t, "e2e/rolling").ids()

	res = f.apply(t, manifest("ondelete", imageB, onDeleteStrategy))
	require.Equal(t, api.ActionConfigured, res.Action)
	checkfor.Eventually(t, wait, poll, func() error {
		ds := f.daemonSet(t, key)
		ro := ds.Status.Rollout
		if ds.CurrentHash == first.CurrentHash || ro == nil || ro.Target != ds.CurrentHash || ro.Waiting != 3 {
			return fmt.Errorf("want a new revision (current %s, first %s) as target with 3 nodes waiting: rollout %+v", ds.CurrentHash, first.CurrentHash, ro)
		}
		return nil
	})
	f.waitPasses(t, 4) // the agents have had every chance to move
	snap := f.containersOf(t, key)
	for _, n := range f.nodes {
		require.NoError(t, snap.running(n, imageA))
	}
	require.Equal(t, pinned, snap.ids(), "OnDelete replaced a container nobody deleted")

	require.NoError(t, f.api.DeleteInstance(t.Context(), key, f.nodes[0]))
	checkfor.Eventually(t, wait, poll, func() error {
		snap := f.containersOf(t, key)
		for _, n := range f.nodes[1:] {
			require.Equal(t, pinned[n], snap.ids()[n], "node %s: container replaced without being deleted", n)
		}
		if err := snap.running(f.nodes[0], imageB); err != nil {
			return err
		}
		ro := f.daemonSet(t, key).Status.Rollout
		if ro == nil || ro.Waiting != 2 || ro.Updated != 1 {
			return fmt.Errorf("want 1 node updated and 2 waiting: rollout %+v", ro)
		}
		return nil
	})

	f.waitPasses(t, 4)
	snap = f.containersOf(t, key)
	require.NoError(t, snap.running(f.nodes[0], imageB))
	for _, n := range f.nodes[1:] {
		require.NoError(t, snap.running(n, imageA))
		assert.Equal(t, pinned[n], snap.ids()[n], "node %s: container replaced without being deleted", n)
	}
	ds := f.daemonSet(t, key)
	require.NotNil(t, ds.Status.Rollout)
	assert.Equal(t, 2, ds.Status.Rollout.Waiting)
	assert.False(t, ds.Status.Rollout.Complete)
	assert.Equal(t, 3, ds.Status.NumberReady)
	assert.Equal(t, rolling, f.containersOf(t, "e2e/rolling").ids(), "the other daemonset's containers were touched")
}

// waitConverged waits until daemonset key has every node ready on the
// current revision, with exactly one running container of image per node,
// and returns the daemonset.
func (f *fleet) waitConverged(t *testing.T, key, image string) api.DaemonSet {
	t.Helper()
	var ds api.DaemonSet
	checkfor.Eventually(t, wait, poll, func() error {
		ds = f.daemonSet(t, key)
		return f.converged(f.containersOf(t, key), ds, image)
	})
	return ds
}

// converged reports why ds and snap do not yet show every node running
// exactly one container of image, ready, with the rollout complete.
func (f *fleet) converged(snap snapshot, ds api.DaemonSet, image string) error {
	for _, n := range f.nodes {
		if err := snap.running(n, image); err != nil {
			return err
		}
	}
	st, want := ds.Status, len(f.nodes)
	if st.NumberReady != want || st.UpdatedNumberScheduled != want || st.DesiredNumberScheduled != want {
		return fmt.Errorf("status %+v, want %d desired, updated and ready", st, want)
	}
	if ro := st.Rollout; ro == nil || !ro.Complete || ro.Target != ds.CurrentHash {
		return fmt.Errorf("rollout %+v not complete at current revision %s", ro, ds.CurrentHash)
	}
	return nil
}
