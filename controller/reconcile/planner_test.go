package reconcile

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgeset/edgeset/schema"
)

// TestPlanIsPerNodeStages checks, over seeded random fleets (some
// daemonsets with a RevisionFunc that keeps, surges, withholds or updates
// per node), that Plan's Output is the sum of per-node Place and Assemble
// results computed with one reused Placement and NodeResult over the nodes
// in random order, with Deleted for the deleted nodes: results do not
// depend on the order nodes are planned in nor leak from node to node, and
// status sums maintained with Add and Sub agree with Plan's.
func TestPlanIsPerNodeStages(t *testing.T) {
	seeds := []uint64{0, 1, 2, 3, 5, 8, 13, 21, 34, 55}
	for range 190 {
		seeds = append(seeds, rand.Uint64())
	}
	for _, seed := range seeds {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			r := rand.New(rand.NewPCG(seed, 14))
			in := randomFleet(t, r)
			randomRevisions(r, &in)
			want := Plan(in)
			got := planByNode(t, r, in)
			require.Equal(t, want, got, "seed %d", seed)
		})
	}
}

// TestRecallAgreesWithPlace: every node of random fleets placed in turn
// with one Placement and kept in one Kept, then recalled, in another
// order, gives the Placement Place gives it, with the same reasons.
func TestRecallAgreesWithPlace(t *testing.T) {
	evicting := 0
	for seed := range uint64(200) {
		r := rand.New(rand.NewPCG(seed, 15))
		in := randomFleet(t, r)
		p := NewPlanner(in.Now, in.DaemonSets, in.Configs)
		var kept Kept
		kept.Reset(len(p.DaemonSets()), len(in.Nodes))
		var scratch Placement
		rows := make([]int, len(in.Nodes))
		for i := range in.Nodes {
			p.Place(&in.Nodes[i], in.Current[in.Nodes[i].Name], &scratch)
			rows[i] = kept.Keep(&scratch)
		}
		require.Equal(t, len(in.Nodes), kept.Rows())
		fork := p.Fork()
		for _, i := range r.Perm(len(in.Nodes)) {
			node, cur := &in.Nodes[i], in.Current[in.Nodes[i].Name]
			var want, got Placement
			p.Place(node, cur, &want)
			fork.Recall(node, cur, &kept, rows[i], &got)
			require.Equal(t, want, got, "seed %d node %s", seed, node.Name)
			for k := range want.DaemonSets {
				wd, gd := &want.DaemonSets[k].Decision, &got.DaemonSets[k].Decision
				require.Equal(t, wd.Reasons(), gd.Reasons(), "seed %d node %s daemonset %d", seed, node.Name, k)
				if !wd.EvictAt.IsZero() {
					evicting++
				}
			}
		}
	}
	require.NotZero(t, evicting, "no decision with an eviction instant drawn: the Kept's side table is untested")
}

// randomRevisions gives about half the managed daemonsets of in a
// RevisionFunc that, for each node, picks at random once: CurrentRevision,
// the revision the node has, a surge pair (returned unsorted and
// duplicated), or none.
func randomRevisions(r *rand.Rand, in *Input) {
	for i := range in.DaemonSets {
		ds := &in.DaemonSets[i]
		if ds.Orphan || r.IntN(2) == 0 {
			continue
		}
		choice := make(map[string]int, len(in.Nodes))
		for _, n := range in.Nodes {
			choice[n.Name] = r.IntN(4)
		}
		current := ds.CurrentRevision
		ds.Revisions = func(node string, have []schema.DesiredInstance) []string {
			switch choice[node] {
			case 1:
				if len(have) > 0 {
					return []string{have[0].Revision}
				}
			case 2:
				return []string{current, "r1", current}
			case 3:
				return nil
			}
			return []string{current}
		}
	}
}

// planByNode computes Plan's Output from the stages, as an incremental
// caller would: nodes in random order into one Placement and NodeResult,
// their results kept per node, then summed in name order.
func planByNode(t *testing.T, r *rand.Rand, in Input) Output {
	t.Helper()
	p := NewPlanner(in.Now, in.DaemonSets, in.Configs)
	daemonsets := p.DaemonSets()
	bits := make(map[string][]StatusBits, len(in.Nodes))
	results := make(map[string]NodeResult, len(in.Nodes))
	var pl Placement
	var res NodeResult
	for _, i := range r.Perm(len(in.Nodes)) {
		n := &in.Nodes[i]
		cur, had := in.Current[n.Name]
		p.Place(n, cur, &pl)
		checkPlaced(t, p, n, cur, &pl)
		revs := func(k int) []string {
			if ds := &daemonsets[k]; ds.Revisions != nil {
				return ds.Revisions(n.Name, pl.DaemonSets[k].Have)
			}
			return []string{daemonsets[k].CurrentRevision}
		}
		p.Assemble(&pl, had, revs, in.Observed[n.Name].Instances, in.Online[n.Name], &res)
		bits[n.Name] = slices.Clone(res.Status)
		results[n.Name] = copyResult(res)
	}

	out := Output{Desired: map[string]NodeDesired{}}
	names := slices.Sorted(maps.Keys(results))
	for _, name := range names {
		res := results[name]
		if res.Changed {
			out.Desired[name] = res.Desired
		}
		out.Scheduled = append(out.Scheduled, res.Scheduled...)
		out.Updated = append(out.Updated, res.Updated...)
		out.Unscheduled = append(out.Unscheduled, res.Unscheduled...)
		out.Evicted = append(out.Evicted, res.Evicted...)
		out.RequeueAt = earliestAfter(in.Now, out.RequeueAt, res.RequeueAt)
	}
	for _, name := range slices.Sorted(maps.Keys(in.Current)) {
		if _, ok := results[name]; ok {
			continue
		}
		desired, publish, forget, changes := p.Deleted(name, in.Current[name])
		require.NotEqual(t, publish, forget, "deleted node %s", name)
		if publish {
			out.Desired[name] = desired
		}
		if forget {
			out.Forget = append(out.Forget, name)
		}
		out.Unscheduled = append(out.Unscheduled, changes...)
	}
	out.RequeueAt = earliestAfter(in.Now, out.RequeueAt, in.NodesChangeAt)
	out.Status = sumStatus(t, r, daemonsets, names, bits)
	return out
}

// checkPlaced checks stage one for node: Runs is placement's rule, Have
// the node's current instances of the daemonset.
func checkPlaced(t *testing.T, p *Planner, n *schema.Node, cur NodeDesired, pl *Placement) {
	t.Helper()
	require.Len(t, pl.DaemonSets, len(p.DaemonSets()))
	for k, ds := range p.DaemonSets() {
		d := pl.DaemonSets[k]
		var have []schema.DesiredInstance
		for _, i := range sortedInstances(cur.Instances) {
			if i.DaemonSet == ds.Key {
				have = append(have, i)
			}
		}
		require.Equal(t, len(have), len(d.Have), "%s on %s", ds.Key, n.Name)
		if len(have) > 0 {
			require.Equal(t, have, d.Have, "%s on %s", ds.Key, n.Name)
		}
		if ds.Orphan {
			require.Equal(t, len(have) > 0, d.Runs, "orphan %s on %s", ds.Key, n.Name)
			continue
		}
		dec := ds.Policy.Decide(n, p.now)
		require.Equal(t, dec.ShouldRun || len(have) > 0 && dec.ShouldContinueRunning, d.Runs, "%s on %s", ds.Key, n.Name)
	}
}

// sumStatus sums the nodes' status bits with Add, checks that removing a
// random subset with Sub leaves the sum of the others, and returns the
// status of every managed daemonset.
func sumStatus(t *testing.T, r *rand.Rand, daemonsets []DaemonSetState, names []string, bits map[string][]StatusBits) map[string]DaemonSetStatus {
	t.Helper()
	total := make([]DaemonSetStatus, len(daemonsets))
	rest := make([]DaemonSetStatus, len(daemonsets))
	var removed []string
	for _, name := range names {
		keep := r.IntN(3) > 0
		if !keep {
			removed = append(removed, name)
		}
		for k, b := range bits[name] {
			if daemonsets[k].Orphan {
				require.Zero(t, b, "orphan %s on %s", daemonsets[k].Key, name)
			}
			total[k].Add(b)
			if keep {
				rest[k].Add(b)
			}
		}
	}
	status := make(map[string]DaemonSetStatus, len(daemonsets))
	for k, ds := range daemonsets {
		st := total[k]
		require.Equal(t, max(st.DesiredNumberScheduled-st.NumberAvailable, 0), st.NumberUnavailable, "%s", ds.Key)
		for _, name := range removed {
			st.Sub(bits[name][k])
		}
		require.Equal(t, rest[k], st, "%s less the nodes %v", ds.Key, removed)
		if !ds.Orphan {
			status[ds.Key] = total[k]
		}
	}
	return status
}

// copyResult copies res out of the NodeResult Assemble reuses.
func copyResult(res NodeResult) NodeResult {
	res.Scheduled = append([]Change(nil), res.Scheduled...)
	res.Updated = append([]Change(nil), res.Updated...)
	res.Unscheduled = append([]Change(nil), res.Unscheduled...)
	res.Evicted = append([]Change(nil), res.Evicted...)
	res.Status = slices.Clone(res.Status)
	return res
}

func earliestAfter(now, a, b time.Time) time.Time {
	if !b.After(now) {
		return a
	}
	if a.IsZero() || b.Before(a) {
		return b
	}
	return a
}

func TestPlannerDaemonSets(t *testing.T) {
	logs2 := compile(t, dsSpec{name: "logs", revision: "r2"})
	p := NewPlanner(t0, []DaemonSetState{compile(t, logs), {Key: "default/a-orphan", Orphan: true}, compile(t, edgeAgent), logs2}, Configs{})
	var keys []string
	for _, ds := range p.DaemonSets() {
		keys = append(keys, ds.Key)
	}
	assert.Equal(t, []string{"default/a-orphan", "default/edge-agent", "default/logs"}, keys)
	assert.Equal(t, "r1", p.DaemonSets()[2].CurrentRevision, "the first of two with one key is kept")
	k, ok := p.Index("default/logs")
	assert.True(t, ok)
	assert.Equal(t, 2, k)
	assert.Equal(t, []string{"r1"}, p.CurrentRevision(k))
	_, ok = p.Index("default/missing")
	assert.False(t, ok)
	assert.PanicsWithValue(t, "reconcile: daemonset default/x has no placement policy", func() {
		NewPlanner(t0, []DaemonSetState{{Key: "default/x", CurrentRevision: "r1"}}, Configs{})
	})
}

// TestPlaceAssemble follows one node through the stages with a reused
// Placement and NodeResult: a placement stage the caller can read, then
// the revisions it picks.
func TestPlaceAssemble(t *testing.T) {
	p := NewPlanner(t0, []DaemonSetState{compile(t, dsSpec{name: "logs", revision: "r2"}), compile(t, edgeAgent)}, Configs{})
	logsK, _ := p.Index("default/logs")
	agentK, _ := p.Index("default/edge-agent")
	n := node("n1", gateway)
	cur := desired(4, inst("zzz", "r1"), inst("logs", "r1"), inst("edge-agent", "r1"))
	var pl Placement
	var res NodeResult

	p.Place(&n, cur, &pl)
	assert.True(t, pl.DaemonSets[logsK].Runs)
	assert.Equal(t, []schema.DesiredInstance{inst("logs", "r1")}, pl.DaemonSets[logsK].Have)
	assert.False(t, pl.DaemonSets[agentK].Runs, "the selector no longer matches")
	assert.Equal(t, "NodeSelectorMismatch", pl.DaemonSets[agentK].Decision.Reason.String())

	keep := func(k int) []string { return []string{pl.DaemonSets[k].Have[0].Revision} }
	p.Assemble(&pl, true, keep, nil, true, &res)
	assert.True(t, res.Changed)
	assert.Equal(t, desired(5, inst("logs", "r1")), res.Desired)
	assert.Equal(t, []string{"n1 default/edge-agent NodeSelectorMismatch", "n1 default/zzz DaemonSetDeleted"}, keys(res.Unscheduled))
	assert.Empty(t, res.Updated)
	assert.Equal(t, StatusDesired|StatusCurrent, res.Status[logsK])
	assert.Zero(t, res.Status[agentK])

	next := res.Desired
	p.Place(&n, next, &pl)
	p.Assemble(&pl, true, nil, nil, false, &res)
	assert.True(t, res.Changed)
	assert.Equal(t, desired(6, inst("logs", "r2")), res.Desired)
	assert.Equal(t, []string{"n1 default/logs Updated"}, keys(res.Updated))
	assert.Empty(t, res.Unscheduled, "the reused result holds only this node's changes")
	assert.Equal(t, StatusDesired|StatusCurrent|StatusOffline, res.Status[logsK])

	p.Place(&n, res.Desired, &pl)
	p.Assemble(&pl, true, nil, nil, false, &res)
	assert.False(t, res.Changed)
	assert.Equal(t, desired(6, inst("logs", "r2")), res.Desired, "unchanged: the current state itself")
	assert.Empty(t, res.Updated)
}

// TestAssembleUpdateLockOverride: an instance a node is newly asked to
// run carries the update lock override its daemonset gives the node; one
// it already runs keeps what it has, override or none.
func TestAssembleUpdateLockOverride(t *testing.T) {
	logs := compile(t, dsSpec{name: "logs", revision: "r2"})
	logs.UpdateLockOverride = func(node string) string {
		if node == "n1" {
			return "2026-01-01T00:00:00Z"
		}
		return ""
	}
	p := NewPlanner(t0, []DaemonSetState{logs}, Configs{})
	n1, n2 := node("n1", gateway), node("n2", gateway)
	var pl Placement
	var res NodeResult
	overridden := schema.DesiredInstance{DaemonSet: "default/logs", Revision: "r2", OverrideUpdateLock: "2026-01-01T00:00:00Z"}

	p.Place(&n1, desired(1, inst("logs", "r1")), &pl)
	p.Assemble(&pl, true, nil, nil, true, &res)
	assert.Equal(t, desired(2, overridden), res.Desired, "newly asked: the override")

	p.Place(&n2, desired(1, inst("logs", "r1")), &pl)
	p.Assemble(&pl, true, nil, nil, true, &res)
	assert.Equal(t, desired(2, inst("logs", "r2")), res.Desired, "no override for this node")

	p.Place(&n1, desired(2, overridden), &pl)
	p.Assemble(&pl, true, nil, nil, true, &res)
	assert.False(t, res.Changed, "kept with its override")

	p.Place(&n1, desired(3, inst("logs", "r2")), &pl)
	p.Assemble(&pl, true, nil, nil, true, &res)
	assert.False(t, res.Changed, "kept without one: an override travels with a new assignment only")
}

// TestPlaceAssembleSteadyDoesNotAllocate: a node whose desired state does
// not change costs no allocation once the Placement and NodeResult have
// grown, config objects included.
func TestPlaceAssembleSteadyDoesNotAllocate(t *testing.T) {
	in := benchFleet(t, 20)
	in.Configs = Configs{
		Refs:       map[string]schema.ConfigRefs{"rev03": {ConfigMaps: []string{"cfg"}, Secrets: []string{"key"}}},
		ConfigMaps: map[string]string{"default/cfg": "c1"},
		Secrets:    map[string]string{"default/key": "k1"},
	}
	in.Current = apply(nil, Plan(in))
	observeAll(&in, in.Current)
	p := NewPlanner(in.Now, in.DaemonSets, in.Configs)
	var pl Placement
	var res NodeResult
	for i := range in.Nodes {
		n := &in.Nodes[i]
		cur := in.Current[n.Name]
		obs := in.Observed[n.Name].Instances
		allocs := testing.AllocsPerRun(10, func() {
			p.Place(n, cur, &pl)
			p.Assemble(&pl, true, p.CurrentRevision, obs, true, &res)
		})
		require.False(t, res.Changed, "node %s", n.Name)
		require.Zero(t, allocs, "node %s", n.Name)
	}
	require.True(t, slices.ContainsFunc(in.Nodes, func(n schema.Node) bool { return len(in.Current[n.Name].ConfigMaps) > 0 }),
		"some node references a config object")
}

func TestPlannerDeleted(t *testing.T) {
	p := NewPlanner(t0, nil, Configs{})
	desired0, publish, forget, changes := p.Deleted("gone", desired(5, inst("logs", "r2"), inst("logs", "r1"), inst("agent", "r1")))
	assert.Equal(t, desired(6), desired0)
	assert.True(t, publish)
	assert.False(t, forget)
	assert.Equal(t, []Change{
		{Node: "gone", DaemonSet: "default/agent", Revision: "r1", Reason: ReasonNodeDeleted, Message: "node gone was deleted"},
		{Node: "gone", DaemonSet: "default/logs", Revision: "r1", Reason: ReasonNodeDeleted, Message: "node gone was deleted"},
	}, changes)

	_, publish, forget, changes = p.Deleted("gone", desired(6))
	assert.False(t, publish)
	assert.True(t, forget)
	assert.Empty(t, changes)
}

func TestStatusBits(t *testing.T) {
	var st DaemonSetStatus
	nodes := []StatusBits{
		StatusDesired | StatusCurrent | StatusReady | StatusAvailable | StatusUpdated,
		StatusDesired | StatusCurrent | StatusReady,
		StatusDesired | StatusOffline,
		StatusMisscheduled,
		0,
	}
	for _, b := range nodes {
		st.Add(b)
	}
	assert.Equal(t, DaemonSetStatus{DesiredNumberScheduled: 3, CurrentNumberScheduled: 2, NumberMisscheduled: 1, NumberReady: 2,
		NumberAvailable: 1, UpdatedNumberScheduled: 1, NumberUnavailable: 2, NodesOffline: 1}, st)
	for _, b := range nodes {
		st.Sub(b)
	}
	assert.Zero(t, st)
}
