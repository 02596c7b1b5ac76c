package controller

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgeset/edgeset/controller/api"
	"github.com/edgeset/edgeset/internal/checkfor"
	"github.com/edgeset/edgeset/schema"
)

// TestObservedGenerationAboveIssuedIsRejected: a device reporting a
// generation the controller never issued to it used to win, and every
// genuine later report (a lower generation) was then ignored as stale.
// The controller trusts no counter beyond what it issued: the report is
// rejected, counted, and recorded as a node event; genuine reports keep
// being applied.
func TestObservedGenerationAboveIssuedIsRejected(t *testing.T) {
	tc := startController(t, Config{})
	tc.applyYAML(t, exporterYAML)
	n := startNode(t, tc.brokerURL(), tc.secret, gateway("gw", nil))
	n.expectDaemonSets(exporter)
	d, _ := n.lastDesired()
	ctx := context.Background()

	n.report(schema.ObservedState{ObservedGeneration: d.Generation + 1000})
	checkfor.Eventually(t, wait, 20*time.Millisecond, func() error {
		if got := metricValue(t, tc.metrics.reg, "edgeset_mqtt_observed_rejected_total", "reason", "generation_ahead"); got != 1 {
			return fmt.Errorf("%v observed states rejected, want 1", got)
		}
		return nil
	})
	node, err := tc.api.GetNode(ctx, "gw")
	require.NoError(t, err)
	assert.Less(t, node.ObservedGeneration, d.Generation+1000, "the forged generation is not recorded")

	n.report(healthy()(d))
	checkfor.Eventually(t, wait, 20*time.Millisecond, func() error {
		node, err := tc.api.GetNode(ctx, "gw")
		if err != nil {
			return err
		}
		if node.ObservedGeneration != d.Generation {
			return fmt.Errorf("observed generation %d, want the genuine %d", node.ObservedGeneration, d.Generation)
		}
		return nil
	})
	checkfor.Eventually(t, wait, 20*time.Millisecond, func() error {
		evs, err := tc.api.Events(ctx, api.EventFilter{Object: "node/gw"})
		if err != nil {
			return err
		}
		for _, e := range evs {
			if e.Reason == "ObservedGenerationAhead" && e.Type == schema.EventWarning {
				return nil
			}
		}
		return fmt.Errorf("no ObservedGenerationAhead event in %+v", evs)
	})
}

// TestNodeReconnectingWithClockBehindIsOnline: a gateway without a real
// time clock reconnects with a session (its connect time) lower than the
// session it had before; it is online.
func TestNodeReconnectingWithClockBehindIsOnline(t *testing.T) {
	tc := startController(t, Config{})
	presence := func(online bool, session int64) {
		p, err := schema.Encode(schema.Presence{SchemaVersion: schema.WireVersion, Node: "gw", Online: online, Session: session})
		require.NoError(t, err)
		tc.handleMessage(schema.NodeTopic("gw", schema.TopicOnline), p)
	}
	st, err := schema.Encode(schema.NodeStatus{SchemaVersion: schema.WireVersion, Node: "gw"})
	require.NoError(t, err)
	tc.handleMessage(schema.NodeTopic("gw", schema.TopicStatus), st)
	presence(true, 1_700_000_000_000_000_000)
	presence(false, 1_700_000_000_000_000_000) // will: the device rebooted
	presence(true, 15_000_000_000)             // 15 s after 1970: no RTC
	s, ok := tc.registry.State("gw")
	require.True(t, ok)
	assert.True(t, s.Online, "a reconnection is online whatever the device's clock says")
}

// TestReadySinceIsTheControllerClock: minReadySeconds counts from when the
// controller first received an instance ready, not from the device's
// clock, which a gateway without an RTC has in 1970 (skipping
// minReadySeconds) or an hour ahead (stalling the rollout).
func TestReadySinceIsTheControllerClock(t *testing.T) {
	tc := startController(t, Config{})
	report := func(ready bool, since time.Time) {
		obs := schema.ObservedState{SchemaVersion: schema.WireVersion, Node: "gw", Instances: []schema.InstanceStatus{
			{DaemonSet: exporter, Revision: "0123456789abcdef0123", Phase: schema.PhaseRunning, Ready: ready, ReadySince: &since},
		}}
		p, err := schema.Encode(obs)
		require.NoError(t, err)
		tc.handleMessage(schema.NodeTopic("gw", schema.TopicObserved), p)
	}
	readySince := func() time.Time {
		obs, _ := tc.state.observedOf("gw")
		in := obs.Instances

		require.Len(t, in, 1)
		require.NotNil(t, in[0].ReadySince)
		return *in[0].ReadySince
	}
	before := time.Now()
	report(true, before.Add(time.Hour))
	assert.False(t, readySince().After(time.Now()), "a first report's time in the future is capped at now")

	epoch := time.Unix(15, 0)
	report(false, epoch)
	report(true, epoch)
	got := readySince()
	assert.False(t, got.Before(before), "newly ready: the controller's receive time, not %s", epoch)
	report(true, epoch.Add(time.Second))
	assert.Equal(t, got, readySince(), "kept while it stays ready")
}
