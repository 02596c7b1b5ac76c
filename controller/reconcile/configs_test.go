package reconcile

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgeset/edgeset/schema"
)

func ref(ns, name, hash string) schema.ObjectRef {
	return schema.ObjectRef{Namespace: ns, Name: name, Hash: hash}
}

func withConfigs(d NodeDesired, cms []schema.ObjectRef, secrets []schema.ObjectRef) NodeDesired {
	d.ConfigMaps, d.Secrets = cms, secrets
	return d
}

// TestPlanConfigs: a node's desired state lists the existing config
// objects its instances reference, and changes exactly when one of those
// does.
func TestPlanConfigs(t *testing.T) {
	logsR2 := dsSpec{name: "logs", revision: "r2"}
	refs := map[string]schema.ConfigRefs{
		"r1": {ConfigMaps: []string{"cfg", "shared"}, Secrets: []string{"key", "missing"}},
		"r2": {ConfigMaps: []string{"shared"}},
	}
	existing := Configs{Refs: refs,
		ConfigMaps: map[string]string{"default/cfg": "c1", "default/shared": "s1", "other/cfg": "o1"},
		Secrets:    map[string]string{"default/key": "k1"},
	}
	r1State := withConfigs(desired(3, inst("logs", "r1")),
		[]schema.ObjectRef{ref("default", "cfg", "c1"), ref("default", "shared", "s1")},
		[]schema.ObjectRef{ref("default", "key", "k1")})
	changed := existing
	changed.ConfigMaps = map[string]string{"default/cfg": "c2", "default/shared": "s1"}

	cases := []struct {
		name    string
		ds      dsSpec
		configs Configs
		current map[string]NodeDesired
		want    map[string]NodeDesired
	}{
		{name: "first state lists existing references, sorted, without the missing one",
			ds: logs, configs: existing,
			want: map[string]NodeDesired{"n1": withConfigs(desired(1, inst("logs", "r1")), r1State.ConfigMaps, r1State.Secrets)}},
		{name: "unchanged objects change nothing",
			ds: logs, configs: existing, current: map[string]NodeDesired{"n1": r1State}},
		{name: "a referenced object's new hash is a new generation",
			ds: logs, configs: changed, current: map[string]NodeDesired{"n1": r1State},
			want: map[string]NodeDesired{"n1": withConfigs(desired(4, inst("logs", "r1")),
				[]schema.ObjectRef{ref("default", "cfg", "c2"), ref("default", "shared", "s1")}, r1State.Secrets)}},
		{name: "a new revision referencing less drops the others",
			ds: logsR2, configs: existing, current: map[string]NodeDesired{"n1": r1State},
			want: map[string]NodeDesired{"n1": withConfigs(desired(4, inst("logs", "r2")),
				[]schema.ObjectRef{ref("default", "shared", "s1")}, nil)}},
		{name: "an unreferenced object's change changes nothing",
			ds: logsR2, configs: changed,
			current: map[string]NodeDesired{"n1": withConfigs(desired(4, inst("logs", "r2")), []schema.ObjectRef{ref("default", "shared", "s1")}, nil)}},
		{name: "no configs known means no references",
			ds: logs, current: map[string]NodeDesired{"n1": r1State},
			want: map[string]NodeDesired{"n1": desired(4, inst("logs", "r1"))}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := Input{Now: t0, Nodes: []schema.Node{node("n1", edge)}, DaemonSets: []DaemonSetState{compile(t, tc.ds)},
				Current: tc.current, Configs: tc.configs}
			out := Plan(in)
			if tc.want == nil {
				tc.want = map[string]NodeDesired{}
			}
			assert.Equal(t, tc.want, out.Desired)
			// Level-triggered: planning over the result changes nothing.
			next := map[string]NodeDesired{}
			for n, d := range tc.current {
				next[n] = d
			}
			for n, d := range out.Desired {
				next[n] = d
			}
			in.Current = next
			assert.Empty(t, Plan(in).Desired, "second plan")
		})
	}
}

// TestPlanConfigsSurgeAndNamespaces: a surge pair referencing one object
// lists it once; references resolve in the daemonset's own namespace.
func TestPlanConfigsSurgeAndNamespaces(t *testing.T) {
	ds := compile(t, logs)
	ds.Revisions = func(string, []schema.DesiredInstance) []string { return []string{"r1", "r2"} }
	other := compile(t, dsSpec{name: "agent"})
	other.Key = "edge/agent"
	out := Plan(Input{Now: t0, Nodes: []schema.Node{node("n1", edge)}, DaemonSets: []DaemonSetState{ds, other},
		Configs: Configs{
			Refs:       map[string]schema.ConfigRefs{"r1": {ConfigMaps: []string{"cfg"}}, "r2": {ConfigMaps: []string{"cfg"}}},
			ConfigMaps: map[string]string{"default/cfg": "d1", "edge/cfg": "e1"},
		}})
	require.Contains(t, out.Desired, "n1")
	assert.Equal(t, []schema.ObjectRef{ref("default", "cfg", "d1"), ref("edge", "cfg", "e1")}, out.Desired["n1"].ConfigMaps)
	assert.Nil(t, out.Desired["n1"].Secrets)
}
