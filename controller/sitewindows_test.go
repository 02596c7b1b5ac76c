package controller

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgeset/edgeset/controller/api"
	"github.com/edgeset/edgeset/schema"
)

// TestMaintenanceWindowHoldsTheSwitch: with the controller's clock outside
// the daemonset's window, a new revision reaches no node: they wait for
// the window, and the status says when it opens; once the clock is inside
// it, the rollout completes.
func TestMaintenanceWindowHoldsTheSwitch(t *testing.T) {
	clock := &testClock{t: time.Date(2026, 1, 15, 11, 0, 0, 0, time.UTC)} // 12:00 in Berlin
	tc := startController(t, Config{Clock: clock.now})
	var nodes []*fakeNode
	for i, site := range []string{"a", "a", "b"} {
		n := startNode(t, tc.brokerURL(), tc.secret, gateway(fmt.Sprintf("gw-%d", i), map[string]string{"site": site}))
		n.setBehaviourWhenPlaced(healthy())
		nodes = append(nodes, n)
	}
	rollout := `  rollout:
    maxUnavailablePerTopology: {topologyKey: site, maxUnavailable: 1}
    maintenanceWindows:
    - {schedule: "0 13 * * *", duration: 1h, timeZone: Europe/Berlin}
`
	strategy := "{type: RollingUpdate, rollingUpdate: {maxUnavailable: 100%}}"
	tc.applyYAML(t, exporterManifest(schema.APIVersionEdgeset, "exporter:1", strategy, rollout))
	v1 := waitRollout(t, tc, complete("")).CurrentHash // nodes that run nothing start at once

	tc.applyYAML(t, exporterManifest(schema.APIVersionEdgeset, "exporter:2", strategy, rollout))
	ds := waitRollout(t, tc, func(ds api.DaemonSet) error {
		if r := ds.Status.Rollout; r == nil || r.Target == v1 || r.WaitingForWindow != 3 {
			return fmt.Errorf("want 3 nodes waiting for the window, rollout %+v", r)
		}
		return nil
	})
	r := ds.Status.Rollout
	require.NotNil(t, r.NextWindow)
	assert.Equal(t, time.Date(2026, 1, 15, 12, 0, 0, 0, time.UTC), r.NextWindow.UTC(), "13:00 in Berlin")
	assert.Zero(t, r.Failed)
	for _, n := range nodes {
		assert.Equal(t, []string{v1}, n.revisions(), "%s switched outside its window", n.name)
	}

	clock.advance(time.Hour)
	tc.wake()
	v2 := waitRollout(t, tc, complete("")).CurrentHash
	require.NotEqual(t, v1, v2)
	for _, n := range nodes {
		assert.Equal(t, []string{v2}, n.revisions())
	}
}
