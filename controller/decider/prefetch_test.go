package decider

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgeset/edgeset/controller/placement"
	"github.com/edgeset/edgeset/controller/rollout"
	"github.com/edgeset/edgeset/schema"
)

// randomPrefetch gives spec, at random, download before switch over the
// zone label.
func randomPrefetch(r *rand.Rand, spec *schema.DaemonSetSpec) {
	if r.IntN(3) != 0 {
		return
	}
	if spec.Rollout == nil {
		spec.Rollout = &schema.RolloutPolicy{}
	}
	spec.Rollout.Prefetch = &schema.PrefetchPolicy{Enabled: true, MaxConcurrentPerSite: ptr(int32(1 + r.IntN(2))), TopologyKey: "zone"}
}

// reportPrefetch is what n's agent reports of the prefetches its desired
// state asks for: done, under way, or failing.
func (w *world) reportPrefetch(n Node) []schema.PrefetchStatus {
	var out []schema.PrefetchStatus
	for _, in := range n.Current.Prefetch {
		st := schema.PrefetchStatus{DaemonSet: in.DaemonSet, Revision: in.Revision, BytesTotal: 1000}
		switch w.r.IntN(3) {
		case 0:
			st.Done, st.BytesDone = true, 1000
		case 1:
			st.BytesDone = int64(w.r.IntN(1000))
		default:
			st.Error = "registry unreachable"
		}
		out = append(out, st)
	}
	return out
}

// prefetchDaemonSet is daemonset default/app on every node, at revision
// rev, with maxUnavailable 3 and one download per zone.
func prefetchDaemonSet(t *testing.T, rev string) DaemonSet {
	spec := schema.DaemonSetSpec{Rollout: &schema.RolloutPolicy{
		Prefetch: &schema.PrefetchPolicy{Enabled: true, MaxConcurrentPerSite: ptr(int32(1)), TopologyKey: "zone"}}}
	spec.UpdateStrategy.RollingUpdate = &schema.RollingUpdateDaemonSet{MaxUnavailable: ptr(schema.FromInt(3))}
	spec.Template.Spec.Containers = []schema.Container{{Name: "c", Image: "busybox"}}
	ds := &schema.DaemonSet{
		TypeMeta: schema.TypeMeta{APIVersion: schema.APIVersionEdgeset, Kind: schema.KindDaemonSet},
		Metadata: schema.ObjectMeta{Name: "app", Namespace: "default"},
		Spec:     spec,
	}
	p, err := placement.Compile(ds)
	require.NoError(t, err)
	return DaemonSet{Key: ds.Key(), Policy: p, Revision: rev, Strategy: rollout.FromSpec(&spec, time.Minute)}
}

// prefetchFleet is a decider with its published states and the agents'
// reports, as the controller keeps them.
type prefetchFleet struct {
	d     *Decider
	now   time.Time
	nodes map[string]*Node
}

func (f *prefetchFleet) decide() {
	for name, nd := range f.d.Decide(f.now).Desired {
		f.nodes[name].Current, f.nodes[name].HasCurrent = nd, true
		f.d.Commit(name, nd)
	}
}

// report has node name's agent report its instances ready and its
// prefetches done or not.
func (f *prefetchFleet) report(name string, done bool) {
	n := f.nodes[name]
	n.Observed, n.Prefetch = nil, nil
	for _, in := range n.Current.Instances {
		n.Observed = append(n.Observed, schema.InstanceStatus{DaemonSet: in.DaemonSet, Revision: in.Revision, Phase: schema.PhaseRunning, Ready: true})
	}
	for _, in := range n.Current.Prefetch {
		n.Prefetch = append(n.Prefetch, schema.PrefetchStatus{DaemonSet: in.DaemonSet, Revision: in.Revision, Done: done})
	}
	f.d.SetNode(*n)
}

// TestPrefetchAsksReachDesiredStates: a daemonset with prefetch asks the
// nodes whose agents prefetch to download the new revision (one per zone
// at a time) and holds each switch until the node reports its download
// done; the node whose agent does not prefetch is never asked and
// switches at once.
func TestPrefetchAsksReachDesiredStates(t *testing.T) {
	f := &prefetchFleet{d: New(), now: t0, nodes: map[string]*Node{}}
	f.d.SetDaemonSet(prefetchDaemonSet(t, "v1"))
	for _, name := range []string{"a1", "a2", "old"} {
		labels := map[string]string{"zone": "a"}
		if name != "old" {
			labels[schema.LabelPrefetch] = "true"
		}
		f.nodes[name] = &Node{Name: name, Model: &schema.Node{Name: name, Labels: labels}, Online: true}
		f.d.SetNode(*f.nodes[name])
	}
	f.decide()
	for name := range f.nodes {
		f.report(name, false)
	}
	f.decide()

	f.d.SetDaemonSet(prefetchDaemonSet(t, "v2"))
	f.decide()
	ask := []schema.DesiredInstance{{DaemonSet: "default/app", Revision: "v2"}}
	assert.Equal(t, ask, f.nodes["a1"].Current.Prefetch, "one download in zone a")
	assert.Empty(t, f.nodes["a2"].Current.Prefetch, "zone a has no room")
	assert.Empty(t, f.nodes["old"].Current.Prefetch, "an old agent is never asked")
	assert.Equal(t, "v2", f.nodes["old"].Current.Instances[0].Revision, "it switches without")
	assert.Equal(t, "v1", f.nodes["a1"].Current.Instances[0].Revision, "a1 waits for its download")
	assert.Equal(t, 2, f.d.Status()["default/app"].Rollout.WaitingForPrefetch)

	f.report("a1", true)
	f.decide()
	assert.Equal(t, "v2", f.nodes["a1"].Current.Instances[0].Revision, "done: a1 switches")
	assert.Equal(t, ask, f.nodes["a2"].Current.Prefetch, "the zone's room passes to a2")
	st := f.d.Status()["default/app"].Rollout
	assert.Equal(t, 1, st.WaitingForPrefetch)
	assert.Equal(t, 1, st.Prefetch.Downloading)

	f.report("a1", true)
	f.decide()
	assert.Empty(t, f.nodes["a1"].Current.Prefetch, "switched: the ask is withdrawn")
}
