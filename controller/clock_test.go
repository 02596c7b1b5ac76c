package controller

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgeset/edgeset/controller/api"
	"github.com/edgeset/edgeset/internal/checkfor"
	"github.com/edgeset/edgeset/schema"
)

// testClock is a clock the test moves (Config.Clock); safe for concurrent
// use by the controller's goroutines.
type testClock struct {
	mu sync.Mutex
	t  time.Time
}

func newTestClock() *testClock { return &testClock{t: time.Now().Round(0)} }

func (c *testClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *testClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// tolerantYAML is exporterYAML tolerating the maintenance:NoExecute taint
// for ten minutes.
const tolerantYAML = exporterYAML + `      tolerations:
      - key: maintenance
        operator: Exists
        effect: NoExecute
        tolerationSeconds: 600
`

// TestClockEvictsPastTolerationSeconds: a NoExecute taint the daemonset
// tolerates for ten minutes keeps its instance until the controller's
// clock, not the wall clock, passes the toleration; then the pass evicts
// it and publishes the node's desired state without it.
func TestClockEvictsPastTolerationSeconds(t *testing.T) {
	clock := newTestClock()
	tc := startController(t, Config{Clock: clock.now})
	tc.applyYAML(t, tolerantYAML)
	n := startNode(t, tc.brokerURL(), tc.secret, gateway("gw", nil))
	n.expectDaemonSets(exporter)

	ctx := context.Background()
	taint := schema.Taint{Key: "maintenance", Effect: schema.TaintNoExecute}
	node, err := tc.api.UpdateNode(ctx, "gw", api.NodePatch{AddTaints: []schema.Taint{taint}})
	require.NoError(t, err)
	tainted := clock.now()
	i := taintAt(node.Taints, taint.Key, taint.Effect)
	require.GreaterOrEqual(t, i, 0, "taints %v, want maintenance:NoExecute", node.Taints)
	require.NotNil(t, node.Taints[i].TimeAdded)
	assert.WithinDuration(t, tainted, *node.Taints[i].TimeAdded, 0, "the taint is stamped on the controller's clock")
	// The pass the taint woke kept the instance: the toleration runs.
	checkfor.Eventually(t, wait, 20*time.Millisecond, func() error { return passedSince(tc, tainted) })
	n.expectDaemonSets(exporter)

	clock.advance(599 * time.Second)
	tc.wake()
	checkfor.Eventually(t, wait, 20*time.Millisecond, func() error { return passedSince(tc, clock.now()) })
	d, err := tc.store.GetDesired("gw")
	require.NoError(t, err)
	assert.Len(t, d.Instances, 1, "a second before the toleration runs out the instance stays")

	clock.advance(time.Second)
	tc.wake()
	n.expectDaemonSets() // evicted, without waiting ten minutes
	ds, err := tc.api.GetDaemonSet(ctx, exporter)
	require.NoError(t, err)
	assert.Zero(t, ds.Status.DesiredNumberScheduled)
}

// TestClockMarksNodeUnreachablePastGrace: a disconnected node keeps its
// announced conditions until the controller's clock passes
// node-offline-grace (an hour here, never waited for); then it is
// Ready=Unknown and tainted unreachable:NoExecute from the grace's end.
func TestClockMarksNodeUnreachablePastGrace(t *testing.T) {
	clock := newTestClock()
	tc := startController(t, Config{NodeOfflineGrace: time.Hour, Clock: clock.now})
	tc.applyYAML(t, exporterYAML)
	n := startNode(t, tc.brokerURL(), tc.secret, gateway("gw", nil))
	n.expectDaemonSets(exporter)
	n.goOffline()

	ctx := context.Background()
	var offlineSince time.Time
	checkfor.Eventually(t, wait, 20*time.Millisecond, func() error {
		node, err := tc.api.GetNode(ctx, "gw")
		if err != nil {
			return err
		}
		if node.Online || node.OfflineSince == nil {
			return fmt.Errorf("node online=%t, want offline", node.Online)
		}
		offlineSince = *node.OfflineSince
		return nil
	})
	node, err := tc.api.GetNode(ctx, "gw")
	require.NoError(t, err)
	assert.Equal(t, schema.ConditionTrue, node.Condition(schema.NodeReady).Status, "within its grace a node keeps its conditions")
	assert.False(t, hasTaint(node.Taints, schema.TaintNodeUnreachable, schema.TaintNoExecute))

	clock.advance(time.Hour)
	tc.wake()
	node, err = tc.api.GetNode(ctx, "gw")
	require.NoError(t, err)
	assert.Equal(t, schema.ConditionUnknown, node.Condition(schema.NodeReady).Status)
	i := taintAt(node.Taints, schema.TaintNodeUnreachable, schema.TaintNoExecute)
	require.GreaterOrEqual(t, i, 0, "taints %v, want unreachable:NoExecute", node.Taints)
	require.NotNil(t, node.Taints[i].TimeAdded)
	assert.WithinDuration(t, offlineSince.Add(time.Hour), *node.Taints[i].TimeAdded, 0, "the taint counts from the grace's end")
	// Daemons tolerate unreachable nodes: the pass keeps the desired state.
	checkfor.Eventually(t, wait, 20*time.Millisecond, func() error { return passedSince(tc, clock.now()) })
	d, err := tc.store.GetDesired("gw")
	require.NoError(t, err)
	assert.Len(t, d.Instances, 1)
}

// passedSince is nil once a reconcile pass has run at or after at on the
// controller's clock.
func passedSince(tc *testController, at time.Time) error {
	tc.passMu.Lock()
	last := tc.lastPass
	tc.passMu.Unlock()
	if last.Before(at) {
		return fmt.Errorf("last pass at %s, want one at or after %s", last, at)
	}
	return nil
}

func taintAt(taints []schema.Taint, key, effect string) int {
	for i, t := range taints {
		if t.Key == key && t.Effect == effect {
			return i
		}
	}
	return -1
}
