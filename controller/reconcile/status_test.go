package reconcile

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/edgeset/edgeset/schema"
)

func observed(node string, instances ...schema.InstanceStatus) schema.ObservedState {
	return schema.ObservedState{SchemaVersion: schema.WireVersion, Node: node, Instances: instances}
}

func running(ds, rev string, ready bool, readySince time.Time) schema.InstanceStatus {
	s := schema.InstanceStatus{DaemonSet: "default/" + ds, Revision: rev, Phase: schema.PhaseRunning, Ready: ready}
	if !readySince.IsZero() {
		s.ReadySince = &readySince
	}
	return s
}

func TestPlanStatus(t *testing.T) {
	long := at(-time.Hour)
	recent := at(-5 * time.Second)
	in := Input{
		Now: t0,
		Nodes: []schema.Node{
			node("available", edge),
			node("not-yet-available", edge),
			node("offline", edge),
			node("old-revision", edge),
			node("misscheduled", edge, noSched),
			node("not-matching", gateway),
			node("new", edge),
			node("ready-without-since", edge),
			node("offline-new", edge),
		},
		DaemonSets: []DaemonSetState{
			compile(t, dsSpec{name: "edge-agent", selector: edge, revision: "r2", minReady: 10}),
			compile(t, dsSpec{name: "other", selector: gateway}),
			{Key: "default/orphan", Orphan: true},
		},
		Current: map[string]NodeDesired{
			"available":           desired(1, inst("edge-agent", "r2")),
			"not-yet-available":   desired(1, inst("edge-agent", "r2")),
			"offline":             desired(1, inst("edge-agent", "r2")),
			"old-revision":        desired(1, inst("edge-agent", "r1")),
			"misscheduled":        desired(1, inst("edge-agent", "r2")),
			"not-matching":        desired(1, inst("orphan", "x")),
			"ready-without-since": desired(1, inst("edge-agent", "r2")),
		},
		Observed: map[string]schema.ObservedState{
			"available":         observed("available", running("edge-agent", "r2", true, long), running("unknown", "r1", true, long)),
			"not-yet-available": observed("not-yet-available", running("edge-agent", "r2", true, recent)),
			"offline":           observed("offline", running("edge-agent", "r2", true, long)),
			"old-revision":      observed("old-revision", running("edge-agent", "r1", false, time.Time{})),
			"misscheduled":      observed("misscheduled", running("edge-agent", "r2", true, long)),
			"not-matching":      observed("not-matching", running("edge-agent", "r2", true, long)),
			"ready-without-since": observed("ready-without-since",
				running("edge-agent", "r2", true, time.Time{})),
		},
		Online: map[string]bool{
			"available": true, "not-yet-available": true, "old-revision": true, "misscheduled": true,
			"not-matching": true, "new": true, "ready-without-since": true,
		},
	}
	out := Plan(in)
	want := map[string]DaemonSetStatus{
		"default/edge-agent": {
			// every edge node but misscheduled
			DesiredNumberScheduled: 7,
			CurrentNumberScheduled: 7,
			NumberMisscheduled:     1,
			// available, not-yet-available, ready-without-since
			NumberReady: 3,
			// available only: ready-without-since cannot prove minReadySeconds
			NumberAvailable: 1,
			// available, not-yet-available, offline, ready-without-since
			UpdatedNumberScheduled: 4,
			NumberUnavailable:      6,
			NodesOffline:           2,
		},
		// the gateway node, just scheduled
		"default/other": {DesiredNumberScheduled: 1, CurrentNumberScheduled: 1, NumberUnavailable: 1},
	}
	assert.Equal(t, want, out.Status)
	assert.Equal(t, at(5*time.Second), out.RequeueAt)
}

func TestPlanStatusWithoutMinReady(t *testing.T) {
	out := Plan(Input{
		Now:        t0,
		Nodes:      []schema.Node{node("n1", nil), node("n2", nil)},
		DaemonSets: []DaemonSetState{compile(t, logs)},
		Current:    map[string]NodeDesired{"n1": desired(1, inst("logs", "r1")), "n2": desired(1, inst("logs", "r1"))},
		Observed: map[string]schema.ObservedState{
			"n1": observed("n1", running("logs", "r1", true, time.Time{})),
			"n2": observed("n2", running("logs", "r1", false, time.Time{})),
		},
		Online: map[string]bool{"n1": true, "n2": true},
	})
	assert.Equal(t, DaemonSetStatus{DesiredNumberScheduled: 2, CurrentNumberScheduled: 2, NumberReady: 1,
		NumberAvailable: 1, UpdatedNumberScheduled: 2, NumberUnavailable: 1}, out.Status["default/logs"])
	assert.True(t, out.RequeueAt.IsZero())
}
