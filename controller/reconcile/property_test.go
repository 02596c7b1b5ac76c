package reconcile

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/edgeset/edgeset/schema"
)

// randomFleet builds a random but valid Input: nodes with random labels,
// taints and cordons; daemonsets with random selectors, tolerations and
// revisions, some orphaned; a Current with stale revisions, duplicates,
// deleted daemonsets, deleted nodes and unsorted instances; random observed
// states and presence.
func randomFleet(t testing.TB, r *rand.Rand) Input {
	in := Input{Now: t0, Current: map[string]NodeDesired{}, Observed: map[string]schema.ObservedState{}, Online: map[string]bool{}}
	nDS := 1 + r.IntN(6)
	var names []string
	for i := range nDS {
		name := fmt.Sprintf("ds-%d", i)
		names = append(names, name)
		if r.IntN(10) == 0 {
			in.DaemonSets = append(in.DaemonSets, DaemonSetState{Key: "default/" + name, Orphan: true})
			continue
		}
		in.DaemonSets = append(in.DaemonSets, compile(t, randomDaemonSet(r, name)))
	}
	names = append(names, "deleted")
	for i := range 1 + r.IntN(30) {
		n := randomNode(r, fmt.Sprintf("n%02d", i))
		in.Nodes = append(in.Nodes, n)
		in.Online[n.Name] = r.IntN(4) > 0
		if r.IntN(5) > 0 {
			in.Current[n.Name] = randomDesired(r, names)
		}
		in.Observed[n.Name] = randomObserved(r, n.Name, names)
	}
	for i := range r.IntN(4) {
		in.Current[fmt.Sprintf("gone%d", i)] = randomDesired(r, names)
	}
	r.Shuffle(len(in.Nodes), func(i, j int) { in.Nodes[i], in.Nodes[j] = in.Nodes[j], in.Nodes[i] })
	in.Configs = randomConfigs(r)
	return in
}

// randomConfigs gives revisions r1..r3 random references among a few
// names, some of which exist.
func randomConfigs(r *rand.Rand) Configs {
	c := Configs{Refs: map[string]schema.ConfigRefs{}, ConfigMaps: map[string]string{}, Secrets: map[string]string{}}
	pick := func(names ...string) []string {
		var out []string
		for _, n := range names {
			if r.IntN(2) == 0 {
				out = append(out, n)
			}
		}
		return out
	}
	for i := 1; i <= 3; i++ {
		c.Refs[fmt.Sprintf("r%d", i)] = schema.ConfigRefs{ConfigMaps: pick("a", "b", "c"), Secrets: pick("s", "t")}
	}
	for _, n := range pick("a", "b", "c") {
		c.ConfigMaps["default/"+n] = fmt.Sprintf("h%d", r.IntN(3))
	}
	for _, n := range pick("s", "t") {
		c.Secrets["default/"+n] = fmt.Sprintf("h%d", r.IntN(3))
	}
	return c
}

// checkConfigs: every desired state lists exactly the existing objects its
// instances reference, sorted and unique.
func checkConfigs(t *testing.T, in Input, final map[string]NodeDesired) {
	t.Helper()
	for node, d := range final {
		var wantCM, wantSecrets []schema.ObjectRef
		for _, inst := range d.Instances {
			refs := in.Configs.Refs[inst.Revision]
			for _, n := range refs.ConfigMaps {
				if h, ok := in.Configs.ConfigMaps["default/"+n]; ok {
					wantCM = append(wantCM, schema.ObjectRef{Namespace: "default", Name: n, Hash: h})
				}
			}
			for _, n := range refs.Secrets {
				if h, ok := in.Configs.Secrets["default/"+n]; ok {
					wantSecrets = append(wantSecrets, schema.ObjectRef{Namespace: "default", Name: n, Hash: h})
				}
			}
		}
		require.Equal(t, sortedRefs(wantCM), d.ConfigMaps, "node %s configmaps", node)
		require.Equal(t, sortedRefs(wantSecrets), d.Secrets, "node %s secrets", node)
	}
}

func randomDaemonSet(r *rand.Rand, name string) dsSpec {
	s := dsSpec{name: name, revision: fmt.Sprintf("r%d", 1+r.IntN(3)), minReady: int32(r.IntN(2) * 30)}
	switch r.IntN(3) {
	case 1:
		s.selector = map[string]string{"role": "edge"}
	case 2:
		s.selector = map[string]string{"zone": "a"}
	}
	if r.IntN(2) == 0 {
		tol := schema.Toleration{Key: "dedicated", Operator: schema.TolerationOpExists, Effect: schema.TaintNoExecute}
		if r.IntN(2) == 0 {
			tol.TolerationSeconds = ptr(int64(60 * r.IntN(5)))
		}
		s.tolerations = append(s.tolerations, tol)
	}
	if r.IntN(2) == 0 {
		s.tolerations = append(s.tolerations, schema.Toleration{Key: "maintenance", Operator: schema.TolerationOpExists, Effect: schema.TaintNoSchedule})
	}
	return s
}

func randomNode(r *rand.Rand, name string) schema.Node {
	n := schema.Node{Name: name, Labels: map[string]string{}, Unschedulable: r.IntN(5) == 0}
	if r.IntN(3) > 0 {
		n.Labels["role"] = []string{"edge", "gateway"}[r.IntN(2)]
	}
	if r.IntN(3) > 0 {
		n.Labels["zone"] = []string{"a", "b"}[r.IntN(2)]
	}
	for _, tt := range []schema.Taint{
		{Key: "dedicated", Effect: schema.TaintNoExecute},
		{Key: "maintenance", Effect: schema.TaintNoSchedule},
		{Key: schema.TaintNodeUnreachable, Effect: schema.TaintNoExecute},
		{Key: "gpu", Effect: schema.TaintPreferNoSchedule},
	} {
		if r.IntN(4) == 0 {
			tt.TimeAdded = ptr(at(-time.Duration(r.IntN(600)) * time.Second))
			n.Taints = append(n.Taints, tt)
		}
	}
	return n
}

func randomDesired(r *rand.Rand, names []string) NodeDesired {
	d := NodeDesired{Generation: r.Uint64N(100)}
	for range r.IntN(len(names) + 2) {
		d.Instances = append(d.Instances, inst(names[r.IntN(len(names))], fmt.Sprintf("r%d", 1+r.IntN(3))))
	}
	return d
}

func randomObserved(r *rand.Rand, node string, names []string) schema.ObservedState {
	o := schema.ObservedState{Node: node}
	for range r.IntN(len(names) + 1) {
		o.Instances = append(o.Instances, running(names[r.IntN(len(names))], fmt.Sprintf("r%d", 1+r.IntN(3)),
			r.IntN(2) == 0, at(-time.Duration(r.IntN(60))*time.Second)))
	}
	return o
}

// TestPlanProperties checks, over seeded random fleets, that Plan bumps
// generations by exactly one on change, never asks a node for two instances
// of one daemonset, places exactly what placement allows, lists exactly the
// existing config objects the instances reference, and is idempotent:
// planning over its own applied output changes nothing.
func TestPlanProperties(t *testing.T) {
	for seed := range uint64(300) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			r := rand.New(rand.NewPCG(seed, 42))
			in := randomFleet(t, r)
			out := Plan(in)
			checkGenerations(t, in, out)
			final := apply(in.Current, out)
			checkPlacement(t, in, final)
			checkConfigs(t, in, final)

			second := Plan(withCurrent(in, final))
			require.Empty(t, second.Desired, "second plan changes desired states")
			require.Empty(t, second.Scheduled)
			require.Empty(t, second.Updated)
			require.Empty(t, second.Unscheduled)
			require.Empty(t, second.Evicted)
			require.Equal(t, out.Status, second.Status)

			third := Plan(withCurrent(in, apply(final, second)))
			require.Empty(t, third.Desired, "third plan changes desired states")
			require.Empty(t, third.Forget, "deleted nodes are forgotten after two plans")
		})
	}
}

func withCurrent(in Input, current map[string]NodeDesired) Input {
	in.Current = current
	return in
}

func checkGenerations(t *testing.T, in Input, out Output) {
	t.Helper()
	for name, d := range out.Desired {
		cur, had := in.Current[name]
		if had {
			require.Equal(t, cur.Generation+1, d.Generation, "node %s", name)
		} else {
			require.Equal(t, uint64(1), d.Generation, "node %s", name)
		}
		require.NotNil(t, d.Instances)
		require.True(t, slices.IsSortedFunc(d.Instances, compareInstances), "node %s: %v", name, d.Instances)
		for i := 1; i < len(d.Instances); i++ {
			if isOrphan(in, d.Instances[i].DaemonSet) {
				continue // frozen as published, a surge pair included
			}
			require.NotEqual(t, d.Instances[i-1].DaemonSet, d.Instances[i].DaemonSet,
				"node %s runs two instances of one daemonset: %v", name, d.Instances)
		}
	}
}

// checkPlacement checks the final desired state of every node against the
// placement decisions: a managed daemonset is there iff placement says
// ShouldRun, or ShouldContinueRunning for a node that had it; an orphan is
// there iff the node had it; nothing else is.
func checkPlacement(t *testing.T, in Input, final map[string]NodeDesired) {
	t.Helper()
	for i := range in.Nodes {
		n := &in.Nodes[i]
		for _, ds := range in.DaemonSets {
			had := hasDaemonSet(in.Current[n.Name].Instances, ds.Key)
			has := hasDaemonSet(final[n.Name].Instances, ds.Key)
			if ds.Orphan {
				require.Equal(t, had, has, "orphan %s on %s", ds.Key, n.Name)
				continue
			}
			d := ds.Policy.Decide(n, in.Now)
			require.Equal(t, d.ShouldRun || had && d.ShouldContinueRunning, has, "%s on %s", ds.Key, n.Name)
		}
		require.False(t, hasDaemonSet(final[n.Name].Instances, "default/deleted"), "deleted daemonset on %s", n.Name)
	}
	for name, d := range final {
		if !slices.ContainsFunc(in.Nodes, func(n schema.Node) bool { return n.Name == name }) {
			require.Empty(t, d.Instances, "deleted node %s", name)
		}
	}
}

func isOrphan(in Input, key string) bool {
	return slices.ContainsFunc(in.DaemonSets, func(ds DaemonSetState) bool { return ds.Key == key && ds.Orphan })
}

func hasDaemonSet(instances []schema.DesiredInstance, key string) bool {
	return slices.ContainsFunc(instances, func(i schema.DesiredInstance) bool { return i.DaemonSet == key })
}
