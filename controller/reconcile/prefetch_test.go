package reconcile

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/edgeset/edgeset/schema"
)

// TestAssembleWithPrefetch: the asks of the daemonsets a node runs go into
// its desired state, with the config objects their revisions reference;
// asks of a daemonset it does not run are dropped; a change of the asks
// alone is a new desired state.
func TestAssembleWithPrefetch(t *testing.T) {
	cfg := Configs{
		Refs:    map[string]schema.ConfigRefs{"r2": {Secrets: []string{"pull"}}},
		Secrets: map[string]string{"default/pull": "s1"},
	}
	p := NewPlanner(t0, []DaemonSetState{compile(t, dsSpec{name: "logs"}), compile(t, edgeAgent)}, cfg)
	logsK, _ := p.Index("default/logs")
	n := node("n1", gateway)
	cur := desired(4, inst("logs", "r1"))
	var pl Placement
	var res NodeResult
	asks := func(k int) string {
		if k == logsK {
			return "r2"
		}
		return "r9" // edge-agent: not run here
	}

	p.Place(&n, cur, &pl)
	p.AssembleWithPrefetch(&pl, true, nil, asks, nil, true, &res)
	assert.True(t, res.Changed)
	want := desired(5, inst("logs", "r1"))
	want.Prefetch = []schema.DesiredInstance{inst("logs", "r2")}
	want.Secrets = []schema.ObjectRef{{Namespace: "default", Name: "pull", Hash: "s1"}}
	assert.Equal(t, want, res.Desired, "r2's pull secret travels with its ask")

	p.Place(&n, res.Desired, &pl)
	p.AssembleWithPrefetch(&pl, true, nil, asks, nil, true, &res)
	assert.False(t, res.Changed, "the same asks: nothing to publish")

	p.Place(&n, res.Desired, &pl)
	p.Assemble(&pl, true, nil, nil, true, &res)
	assert.True(t, res.Changed, "the ask withdrawn")
	assert.Equal(t, desired(6, inst("logs", "r1")), res.Desired)
}
