package controller

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgeset/edgeset/controller/api"
	"github.com/edgeset/edgeset/controller/decider"
	"github.com/edgeset/edgeset/controller/rollout"
	"github.com/edgeset/edgeset/controller/store"
	"github.com/edgeset/edgeset/internal/checkfor"
	"github.com/edgeset/edgeset/schema"
)

// errDiskFull stands in for the file system's refusal.
var errDiskFull = errors.New("write edgeset.db: no space left on device")

// refuseWrites makes tc's store refuse every write from now on, and
// returns once an apply was refused and the controller reports itself
// unready. A write of the controller's own that passed the fault check
// before it was injected may commit after the apply failed and clear the
// fault, so it applies until the refusal is what the controller last saw.
func refuseWrites(t *testing.T, tc *testController) {
	t.Helper()
	ctx := context.Background()
	tc.store.FailWrites(func() error { return errDiskFull })
	checkfor.Eventually(t, wait, 50*time.Millisecond, func() error {
		if _, err := tc.api.Apply(ctx, "ds.yaml", []byte(exporterYAML), false); err == nil {
			return errors.New("an apply committed while the disk refuses writes")
		}
		if err := tc.Ready(ctx); !errors.Is(err, api.ErrUnavailable) {
			return fmt.Errorf("ready after a refused write: %v, want unavailable", err)
		}
		return nil
	})
}

// TestStoreWriteFailureMakesUnready: while store writes fail, /readyz
// fails naming the store and edgeset_store_writable is 0 with every
// failure counted; the next successful write clears both.
func TestStoreWriteFailureMakesUnready(t *testing.T) {
	tc := startController(t, Config{})
	<-tc.Synced()
	ctx := context.Background()
	require.NoError(t, tc.Ready(ctx))
	assert.Equal(t, 1.0, gaugeValue(tc.metrics.storeWritable))

	refuseWrites(t, tc)
	err := tc.Ready(ctx)
	require.ErrorIs(t, err, api.ErrUnavailable)
	assert.Contains(t, err.Error(), "store: ")
	assert.Contains(t, err.Error(), "no space left on device")
	assert.Contains(t, err.Error(), tc.store.Path())
	assert.Equal(t, 0.0, gaugeValue(tc.metrics.storeWritable))
	assert.GreaterOrEqual(t, counterValue(tc.metrics.storeWriteErrors), 1.0)

	tc.store.FailWrites(nil)
	tc.applyYAML(t, exporterYAML)
	require.NoError(t, tc.Ready(ctx), "a successful write clears the fault")
	assert.Equal(t, 1.0, gaugeValue(tc.metrics.storeWritable))
}

// TestStoreFaultClearsWithoutAnotherRequest: once the disk takes writes
// again, readiness comes back by itself, without waiting for some other
// write: a controller whose failed write was an API request (nothing
// retries it) and whose fleet is quiet would otherwise stay unready for
// good, and behind a load balancer that honours /readyz no operator
// request could reach it to make that write.
func TestStoreFaultClearsWithoutAnotherRequest(t *testing.T) {
	tc := startController(t, Config{})
	<-tc.Synced()
	ctx := context.Background()
	refuseWrites(t, tc)

	tc.store.FailWrites(nil)
	checkfor.Eventually(t, wait, 50*time.Millisecond, func() error { return tc.Ready(ctx) })
	assert.Equal(t, 1.0, gaugeValue(tc.metrics.storeWritable))
	_, err := tc.api.GetDaemonSet(ctx, "monitoring/exporter")
	assert.ErrorIs(t, err, api.ErrNotFound, "the probe write stores nothing")
}

// TestFlushNodesKeepsDirtyOnFailure: node records whose write failed stay
// dirty and are stored by the next flush that succeeds.
func TestFlushNodesKeepsDirtyOnFailure(t *testing.T) {
	c, err := New(Config{DataDir: t.TempDir(), MQTTAddr: "127.0.0.1:0", APIAddr: "127.0.0.1:0"}, testLogger(t))
	require.NoError(t, err)
	t.Cleanup(c.closeResources)
	for i := range 3 {
		name := fmt.Sprintf("n%d", i)
		c.registry.ApplyStatus(schema.NodeStatus{Node: name}, time.Now())
		c.markNodeChanged(name)
	}
	c.store.FailWrites(func() error { return errDiskFull })
	c.flushNodes()
	recs, err := c.store.ListNodes()
	require.NoError(t, err)
	require.Empty(t, recs)

	c.store.FailWrites(nil)
	c.flushNodes()
	recs, err = c.store.ListNodes()
	require.NoError(t, err)
	assert.Len(t, recs, 3, "the records of the failed flush are written by the next one")
}

func gaugeValue(g interface{ Write(*dto.Metric) error }) float64 {
	var m dto.Metric
	if err := g.Write(&m); err != nil {
		return -1
	}
	return m.GetGauge().GetValue()
}

// newIdleController is a controller that is not running: no pass, no
// flush, no event writer, so the only store writes are the test's own.
func newIdleController(t *testing.T, cfg Config) *Controller {
	t.Helper()
	cfg.DataDir = cmpOr(cfg.DataDir, t.TempDir())
	cfg.MQTTAddr, cfg.APIAddr = "127.0.0.1:0", "127.0.0.1:0"
	c, err := New(cfg, testLogger(t))
	require.NoError(t, err)
	t.Cleanup(c.closeResources)
	return c
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// failWrite makes the store refuse its nth read-write transaction from
// now on (1 is the next one), as a disk that fills up would, and only that
// one.
func failWrite(c *Controller, nth int) {
	var mu sync.Mutex
	calls := 0
	c.store.FailWrites(func() error {
		mu.Lock()
		defer mu.Unlock()
		if calls++; calls == nth {
			return errDiskFull
		}
		return nil
	})
}

// allOrNothing calls op with the store refusing its first, second, ...
// write until op succeeds. After each failure unchanged must hold (nothing
// of op is kept), after the success changed (all of it is).
func allOrNothing(t *testing.T, c *Controller, op func() error, unchanged, changed func() error) {
	t.Helper()
	for nth := 1; nth <= 10; nth++ {
		failWrite(c, nth)
		err := op()
		c.store.FailWrites(nil)
		if err == nil {
			require.NoError(t, changed(), "after the success with write %d refused (not reached)", nth)
			return
		}
		require.ErrorIs(t, err, errDiskFull, "write %d refused", nth)
		require.NoError(t, unchanged(), "with write %d refused, something of the failed request was kept", nth)
	}
	t.Fatal("op never succeeded")
}

// TestDeleteNodeAllOrNothing: a node deletion whose store write fails
// keeps the node's record, its overrides, its desired state and its place
// in the registry.
func TestDeleteNodeAllOrNothing(t *testing.T) {
	c := newIdleController(t, Config{})
	c.registry.ApplyStatus(gateway("gw", nil), time.Now())
	require.NoError(t, c.store.PutNode(store.NodeRecord{Name: "gw", Status: gateway("gw", nil)}))
	v := "x"
	require.NoError(t, c.store.PutOverrides("gw", store.NodeOverrides{Labels: map[string]*string{"k": &v}}))
	before, err := c.store.PutDesired("gw", store.DesiredRecord{Instances: []schema.DesiredInstance{{DaemonSet: "a/b", Revision: "r1"}}})
	require.NoError(t, err)

	allOrNothing(t, c, func() error { return c.DeleteNode(context.Background(), "gw") },
		func() error {
			if _, err := c.store.GetNode("gw"); err != nil {
				return fmt.Errorf("node record: %w", err)
			}
			if _, err := c.store.GetOverrides("gw"); err != nil {
				return fmt.Errorf("overrides: %w", err)
			}
			if d, err := c.store.GetDesired("gw"); err != nil || d.Generation != before.Generation {
				return fmt.Errorf("desired state changed: %+v, %v", d, err)
			}
			if _, ok := c.registry.Input("gw"); !ok {
				return errors.New("the registry forgot the node")
			}
			return nil
		},
		func() error {
			if _, err := c.store.GetNode("gw"); !errors.Is(err, store.ErrNotFound) {
				return fmt.Errorf("node record kept: %v", err)
			}
			if _, err := c.store.GetOverrides("gw"); !errors.Is(err, store.ErrNotFound) {
				return fmt.Errorf("overrides kept: %v", err)
			}
			if d, err := c.store.GetDesired("gw"); err != nil || len(d.Instances) != 0 {
				return fmt.Errorf("desired state not cleared: %+v, %v", d, err)
			}
			return nil
		})
}

// dsState is what the store holds of a daemonset: its image, current
// revision and revision hashes.
func dsState(c *Controller, key string) (string, error) {
	rec, err := c.store.GetDaemonSet(key)
	if err != nil {
		return "", err
	}
	revs, err := c.store.ListRevisions(key)
	if err != nil {
		return "", err
	}
	hashes := make([]string, len(revs))
	for i, r := range revs {
		hashes[i] = r.Hash
	}
	return fmt.Sprintf("image %s, current %s, revisions %v", rec.DaemonSet.Spec.Template.Spec.Containers[0].Image,
		rec.CurrentRevision, hashes), nil
}

// TestApplyAllOrNothing: an apply whose store write fails, its revision
// pruning included, keeps nothing of the request and says so, naming
// where its objects were declared.
func TestApplyAllOrNothing(t *testing.T) {
	c := newIdleController(t, Config{})
	ctx := context.Background()
	manifest := func(image string) []byte {
		return []byte(strings.Replace(dsYAML("one", image), "spec:\n", "spec:\n  revisionHistoryLimit: 1\n", 1))
	}
	for _, image := range []string{"one:1", "one:2", "one:3"} {
		_, err := c.ApplyManifests(ctx, "ds.yaml", manifest(image), api.ApplyOptions{})
		require.NoError(t, err)
	}
	before, err := dsState(c, "files/one")
	require.NoError(t, err)
	var lastErr error
	allOrNothing(t, c, func() error {
		_, lastErr = c.ApplyManifests(ctx, "ds.yaml", manifest("one:4"), api.ApplyOptions{})
		return lastErr
	}, func() error {
		if now, err := dsState(c, "files/one"); err != nil || now != before {
			return fmt.Errorf("store holds %s (%v), want %s", now, err, before)
		}
		assert.Contains(t, lastErr.Error(), "nothing applied")
		assert.Contains(t, lastErr.Error(), "ds.yaml:1")
		return nil
	}, func() error {
		now, err := dsState(c, "files/one")
		if err != nil || !strings.Contains(now, "image one:4") || strings.Count(now, " ") != strings.Count(before, " ") {
			return fmt.Errorf("store holds %s (%v), want one:4 with the history pruned to its limit", now, err)
		}
		return nil
	})
}

// TestApplyManyObjectsAllOrNothing: a large apply whose commit the disk
// refuses stores none of its objects.
func TestApplyManyObjectsAllOrNothing(t *testing.T) {
	c := newIdleController(t, Config{})
	var b strings.Builder
	for i := range 200 {
		b.WriteString(dsYAML(fmt.Sprintf("ds%d", i), "img:1") + "---\n")
	}
	failWrite(c, 1)
	_, err := c.ApplyManifests(context.Background(), "many.yaml", []byte(b.String()), api.ApplyOptions{})
	require.ErrorIs(t, err, errDiskFull)
	assert.Contains(t, err.Error(), "nothing applied: store 200 object(s) (many.yaml:1 ... many.yaml:")
	recs, err := c.store.ListDaemonSets()
	require.NoError(t, err)
	assert.Empty(t, recs)
}

// TestManifestsSyncAllOrNothing: a file's sync (its apply and the pruning
// of what it no longer declares) keeps nothing when a write fails.
func TestManifestsSyncAllOrNothing(t *testing.T) {
	c := newIdleController(t, Config{Prune: true})
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "multi.yaml")
	first := []byte(dsYAML("one", "one:1") + "---\n" + dsYAML("two", "two:1"))
	c.applySource(ctx, path, first, sha256.Sum256(first), nil)
	_, err := c.store.GetDaemonSet("files/two")
	require.NoError(t, err)

	next := []byte(dsYAML("one", "one:2"))
	for nth := 1; nth <= 10; nth++ {
		failWrite(c, nth)
		c.applySource(ctx, path, next, sha256.Sum256(next), nil)
		c.store.FailWrites(nil)
		one, err := dsState(c, "files/one")
		require.NoError(t, err)
		_, twoErr := c.store.GetDaemonSet("files/two")
		switch {
		case strings.Contains(one, "one:1") && twoErr == nil:
			continue // nothing kept; the next sync tries again
		case strings.Contains(one, "one:2") && errors.Is(twoErr, store.ErrNotFound):
			return // all of it
		default:
			t.Fatalf("write %d refused: half a sync kept: %s, two: %v", nth, one, twoErr)
		}
	}
	t.Fatal("the sync never succeeded")
}

// TestStoreRolloutAllOrNothing: a rollback's rollout state and the
// daemonset's current revision are stored together or not at all.
func TestStoreRolloutAllOrNothing(t *testing.T) {
	c := newIdleController(t, Config{})
	ctx := context.Background()
	r1, err := c.ApplyManifests(ctx, "ds.yaml", []byte(dsYAML("one", "one:1")), api.ApplyOptions{})
	require.NoError(t, err)
	_, err = c.ApplyManifests(ctx, "ds.yaml", []byte(dsYAML("one", "one:2")), api.ApplyOptions{})
	require.NoError(t, err)
	rev1, err := c.store.ListRevisions("files/one")
	require.NoError(t, err)
	require.Len(t, rev1, 2)
	require.EqualValues(t, 1, r1[0].Revision)
	back := rollout.State{Target: rev1[0].Hash, Stable: rev1[0].Hash}
	state := func() (string, error) {
		st, found, _, err := loadRollout(c.store, "files/one")
		if err != nil {
			return "", err
		}
		rec, err := c.store.GetDaemonSet("files/one")
		return fmt.Sprintf("rollout %t %s, current %s", found, st.Target, rec.CurrentRevision), err
	}
	before, err := state()
	require.NoError(t, err)
	allOrNothing(t, c, func() error {
		_, _, err := c.storeDecision(time.Now(), decider.Decision{
			Rollouts: map[string]rollout.Delta{"files/one": {State: back, StateChanged: true}}})
		return err
	}, func() error {
		if now, err := state(); err != nil || now != before {
			return fmt.Errorf("store holds %s (%v), want %s", now, err, before)
		}
		return nil
	}, func() error {
		if now, err := state(); err != nil || now != fmt.Sprintf("rollout true %s, current %s", back.Target, back.Target) {
			return fmt.Errorf("store holds %s (%v)", now, err)
		}
		return nil
	})
}
