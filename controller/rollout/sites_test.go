package rollout

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
	_ "time/tzdata" // the zones the cases name, whatever the host has

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgeset/edgeset/controller/rollout/window"
	"github.com/edgeset/edgeset/schema"
)

// randomLabels puts a node in one of three sites and two regions, or
// leaves a label out.
func randomLabels(rng *rand.Rand) map[string]string {
	labels := map[string]string{}
	if rng.IntN(5) != 0 {
		labels["site"] = fmt.Sprint("s", rng.IntN(3))
	}
	if rng.IntN(4) != 0 {
		labels["region"] = []string{"eu", "us"}[rng.IntN(2)]
	}
	return labels
}

func mustWindow(t testing.TB, spec schema.MaintenanceWindow) window.Window {
	t.Helper()
	w, err := window.New(spec)
	require.NoError(t, err)
	return w
}

func mustWindows(specs ...schema.MaintenanceWindow) []window.Window {
	out := make([]window.Window, len(specs))
	for i, spec := range specs {
		w, err := window.New(spec)
		if err != nil {
			panic(err)
		}
		out[i] = w
	}
	return out
}

// randomSchedule gives s, at random, a per-site budget and maintenance
// windows that open and close every few minutes (some nodes, the ones no
// window selects, then never switch).
func randomSchedule(rng *rand.Rand, s *Strategy) {
	if rng.IntN(2) == 0 {
		s.Topology = &TopologyBudget{Key: "site", MaxUnavailable: schema.FromInt(int32(1 + rng.IntN(2)))}
		if rng.IntN(3) == 0 {
			s.Topology.MaxUnavailable = schema.FromString(fmt.Sprintf("%d%%", 10+rng.IntN(50)))
		}
	}
	if rng.IntN(3) == 0 {
		s.Windows = mustWindows(
			schema.MaintenanceWindow{Schedule: "*/2 * * * *", Duration: "1m", NodeSelector: map[string]string{"region": "eu"}},
			schema.MaintenanceWindow{Schedule: "1-59/3 * * * *", Duration: "90s", TimeZone: "America/New_York", NodeSelector: map[string]string{"region": "us"}},
		)
		if rng.IntN(2) == 0 {
			s.Windows = append(s.Windows, mustWindows(schema.MaintenanceWindow{Schedule: "*/5 * * * *", Duration: "2m"})...)
		}
	}
}

// checkSchedule asserts the per-site budget and the windows on one step:
// no domain gets more nodes in flight than its budget (or than it had),
// and a node switches to the target only inside one of its windows.
func (sm *sim) checkSchedule(t *testing.T, in []Node, d Decision) {
	t.Helper()
	p := &pass{now: sm.now, s: sm.s, st: sm.st}
	if sm.s.Topology != nil {
		_, maxSurge := (&pass{s: sm.s, total: len(in)}).budget()
		before, after, total := inFlightByDomain(p, in, nil, maxSurge > 0), inFlightByDomain(p, in, d.Assign, maxSurge > 0), map[string]int{}
		for i := range in {
			total[sm.s.domainOf(in[i].Labels)]++
		}
		for domain, n := range after {
			if limit := p.domainLimit(total[domain]); n > max(limit, before[domain]) {
				t.Fatalf("at %s: domain %q has %d nodes in flight after the step (before %d), its budget %d",
					sm.now.Sub(t0), domain, n, before[domain], limit)
			}
		}
	}
	if len(sm.s.Windows) > 0 {
		for i := range in {
			n := &in[i]
			switched := len(n.Assigned) > 0 && !slices.Contains(n.Assigned, d.State.Target) && slices.Contains(d.Assign[n.Name], d.State.Target)
			if switched && !openFor(sm.s.Windows, n.Labels, sm.now) {
				t.Fatalf("at %s: node %s (labels %v) switched to %s outside its windows", sm.now.Sub(t0), n.Name, n.Labels, d.State.Target)
			}
		}
	}
}

func openFor(ws []window.Window, labels map[string]string, now time.Time) bool {
	for _, w := range ws {
		if w.Selects(labels) && w.At(now).Open {
			return true
		}
	}
	return false
}

// inFlightByDomain counts, by domain, the reachable nodes that do not
// serve the daemon under assign (nil: their current assignment), or with
// surge the nodes holding a pair.
func inFlightByDomain(p *pass, in []Node, assign map[string][]string, surge bool) map[string]int {
	out := map[string]int{}
	for i := range in {
		n := &in[i]
		v := p.viewOf(n)
		revs := n.Assigned
		if assign != nil {
			revs = assign[n.Name]
		}
		switch {
		case surge && len(revs) > 1:
			out[p.viewDomain(&v)]++
		case !surge && !v.offline && !p.availableUnder(&v, revs):
			out[p.viewDomain(&v)]++
		}
	}
	return out
}

// TestPropertySiteBudgetsAndWindows: over random fleets spread over sites,
// strategies with a per-site budget and windows, flapping links and late
// reports, neither the global nor any site's budget is exceeded by a step,
// no node switches outside its windows, and once the links heal every
// reachable node ends on the target.
func TestPropertySiteBudgetsAndWindows(t *testing.T) {
	for seed := uint64(1); seed <= 40; seed++ {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 13))
			s := randomStrategy(rng)
			s.Topology = &TopologyBudget{Key: "site", MaxUnavailable: schema.FromInt(int32(1 + rng.IntN(2)))}
			if rng.IntN(2) == 0 {
				s.Topology.MaxUnavailable = schema.FromString(fmt.Sprintf("%d%%", 10+rng.IntN(40)))
			}
			if rng.IntN(2) == 0 {
				// Every node has a window: the one without a selector.
				s.Windows = mustWindows(
					schema.MaintenanceWindow{Schedule: "*/3 * * * *", Duration: "1m", TimeZone: "Europe/Berlin", NodeSelector: map[string]string{"region": "eu"}},
					schema.MaintenanceWindow{Schedule: "1-59/2 * * * *", Duration: "30s"},
				)
			}
			sm := newSim(seed, 5+rng.IntN(40), s)
			for _, n := range sm.nodes {
				n.labels = randomLabels(rng)
			}
			sm.flapProb = 0.02 * float64(rng.IntN(4))
			sm.lateProb = 0.2 * float64(rng.IntN(2))
			sm.st = sm.st.Retarget("v2")
			for range 200 {
				sm.tick()
				sm.step(t)
			}
			sm.healLinks()
			for range 1200 {
				sm.tick()
				sm.step(t)
				if sm.converged("v2") {
					return
				}
			}
			t.Fatalf("not converged to v2 with strategy %+v; state %+v", sm.s, sm.st)
		})
	}
}

// site builds n nodes of one site on rev, named prefix-0..n-1.
func site(prefix string, n int, rev string, labels map[string]string) []Node {
	out := make([]Node, n)
	for i := range out {
		out[i] = on(fmt.Sprintf("%s-%d", prefix, i), []string{rev}, ready(rev))
		out[i].Labels = labels
	}
	return out
}

func TestStepPerSiteBudget(t *testing.T) {
	now := t0.Add(time.Hour)
	var fleet []Node
	fleet = append(fleet, site("a", 3, "v1", map[string]string{"site": "a"})...)
	fleet = append(fleet, site("b", 3, "v1", map[string]string{"site": "b"})...)
	fleet = append(fleet, site("c", 10, "v1", map[string]string{"site": "c"})...)
	fleet = append(fleet, site("z", 2, "v1", nil)...) // no site label: a domain of their own
	tests := []struct {
		name    string
		budget  schema.IntOrString
		global  schema.IntOrString
		surge   schema.IntOrString
		prepare func(nodes []Node)
		want    map[string]int // nodes moved to v2, by site prefix
	}{
		{name: "one per site", budget: schema.FromInt(1), global: schema.FromString("100%"),
			want: map[string]int{"a": 1, "b": 1, "c": 1, "z": 1}},
		{name: "percentage rounds up per site", budget: schema.FromString("25%"), global: schema.FromString("100%"),
			want: map[string]int{"a": 1, "b": 1, "c": 3, "z": 1}},
		{name: "the global budget still holds", budget: schema.FromInt(2), global: schema.FromInt(3),
			want: map[string]int{"a": 2, "b": 1}},
		{name: "an unavailable node fills its site", budget: schema.FromInt(1), global: schema.FromString("100%"),
			prepare: func(nodes []Node) { nodes[3].Observed = []Instance{notReady("v1", schema.PhaseRunning)} }, // b-0
			want:    map[string]int{"a": 1, "b": 1, "c": 1, "z": 1}},
		{name: "surge pairs per site", budget: schema.FromInt(1), global: schema.FromInt(0), surge: schema.FromString("100%"),
			want: map[string]int{"a": 1, "b": 1, "c": 1, "z": 1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			nodes := slices.Clone(fleet)
			if tc.prepare != nil {
				tc.prepare(nodes)
			}
			s := Strategy{MaxUnavailable: tc.global, MaxSurge: tc.surge, Topology: &TopologyBudget{Key: "site", MaxUnavailable: tc.budget}}
			d := Step(now, s, State{Target: "v2", Stable: "v1"}, nodes)
			moved := map[string]int{}
			for name, revs := range d.Assign {
				if slices.Contains(revs, "v2") {
					moved[name[:1]]++
				}
			}
			assert.Equal(t, tc.want, moved)
			tr := trackerOver(s, State{Target: "v2", Stable: "v1"}, nodes)
			got := tr.Step(now)
			assert.Equal(t, d.Status, got.Status, "the tracker agrees")
			for name, revs := range got.Assign {
				assert.Equal(t, d.Assign[name], revs, "the tracker moves %s as Step does", name)
			}
			assert.Len(t, got.Assign, countAssigned(d, "v2"))
		})
	}
}

func TestStepMaintenanceWindows(t *testing.T) {
	berlin := schema.MaintenanceWindow{Schedule: "0 2 * * *", Duration: "2h", TimeZone: "Europe/Berlin", NodeSelector: map[string]string{"region": "eu"}}
	newYork := schema.MaintenanceWindow{Schedule: "0 2 * * *", Duration: "2h", TimeZone: "America/New_York", NodeSelector: map[string]string{"region": "us"}}
	fleet := func() []Node {
		var nodes []Node
		nodes = append(nodes, site("eu", 2, "v1", map[string]string{"region": "eu"})...)
		nodes = append(nodes, site("us", 2, "v1", map[string]string{"region": "us"})...)
		nodes = append(nodes, site("xx", 1, "v1", map[string]string{"region": "ap"})...) // no window selects it
		return nodes
	}
	utc := func(s string) time.Time {
		at, err := time.Parse(time.RFC3339, s)
		require.NoError(t, err)
		return at
	}
	tests := []struct {
		name         string
		now          string
		wantMoved    []string
		wantWaiting  int // for a window
		wantNext     string
		wantRequeue  string
		progressDead time.Duration
	}{
		{name: "both closed, winter", now: "2026-01-15T12:00:00Z", wantWaiting: 5,
			wantNext: "2026-01-16T01:00:00Z", wantRequeue: "2026-01-16T01:00:00Z"},
		{name: "berlin open in winter (01:00 UTC)", now: "2026-01-16T01:30:00Z", wantMoved: []string{"eu-0", "eu-1"}, wantWaiting: 3,
			wantNext: "2026-01-16T07:00:00Z", wantRequeue: "2026-01-16T03:00:00Z"},
		{name: "berlin open in summer (00:00 UTC)", now: "2026-07-16T00:30:00Z", wantMoved: []string{"eu-0", "eu-1"}, wantWaiting: 3,
			wantNext: "2026-07-16T06:00:00Z", wantRequeue: "2026-07-16T02:00:00Z"},
		{name: "new york skips the night 02:00 does not exist", now: "2026-03-08T06:30:00Z", wantWaiting: 5,
			wantNext: "2026-03-09T01:00:00Z", wantRequeue: "2026-03-09T01:00:00Z"},
		{name: "new york open the day after, in EDT", now: "2026-03-09T06:30:00Z", wantMoved: []string{"us-0", "us-1"}, wantWaiting: 3,
			wantNext: "2026-03-10T01:00:00Z", wantRequeue: "2026-03-09T08:00:00Z"},
		{name: "a long wait fails no one", now: "2026-01-15T12:00:00Z", progressDead: time.Minute, wantWaiting: 5,
			wantNext: "2026-01-16T01:00:00Z", wantRequeue: "2026-01-16T01:00:00Z"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := Strategy{MaxUnavailable: schema.FromString("100%"), Windows: mustWindows(berlin, newYork),
				ProgressDeadline: tc.progressDead, FailureThreshold: ptr(schema.FromInt(1))}
			now := utc(tc.now)
			nodes := fleet()
			d := Step(now, s, State{Target: "v2", Stable: "v1"}, nodes)
			var moved []string
			for name, revs := range d.Assign {
				if slices.Contains(revs, "v2") {
					moved = append(moved, name)
				}
			}
			slices.Sort(moved)
			assert.Equal(t, tc.wantMoved, moved)
			assert.Equal(t, tc.wantWaiting, d.Status.WaitingForWindow)
			assert.Equal(t, 0, d.Status.Failed)
			assert.Equal(t, utc(tc.wantNext), d.Status.NextWindow.UTC(), "next window")
			assert.Equal(t, utc(tc.wantRequeue), d.RequeueAt.UTC(), "requeue")
			assert.Len(t, d.State.toJSON().AssignedAt, len(moved), "nothing assigned before its window: no deadline runs")

			tr := trackerOver(s, State{Target: "v2", Stable: "v1"}, nodes)
			got := tr.Step(now)
			assert.Equal(t, d.Status, got.Status, "the tracker agrees")
			assert.True(t, d.RequeueAt.Equal(got.RequeueAt))
		})
	}
}

func TestStepWindowsSpareNewNodesAndSurgeSettles(t *testing.T) {
	s := Strategy{MaxUnavailable: schema.FromInt(1), MaxSurge: schema.FromInt(1),
		Windows: mustWindows(schema.MaintenanceWindow{Schedule: "0 2 * * *", Duration: "1h"})}
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC) // closed
	pair := on("pair", []string{"v1", "v2"}, ready("v1"), ready("v2"))
	joiner := on("joiner", nil)
	d := Step(now, s, withProgress(State{Target: "v2", Stable: "v1"}, map[string]time.Time{"pair": t0}, nil), []Node{pair, joiner})
	assert.Equal(t, []string{"v2"}, d.Assign["joiner"], "a node that runs nothing is not switched: it starts on the target")
	assert.Equal(t, []string{"v2"}, d.Assign["pair"], "a surge pair settles outside the window")
	assert.True(t, d.Status.NextWindow.IsZero(), "no node waits for a window")
}

func TestStepNoWindowSelects(t *testing.T) {
	s := Strategy{MaxUnavailable: schema.FromInt(1),
		Windows: mustWindows(schema.MaintenanceWindow{Schedule: "@hourly", Duration: "59m", NodeSelector: map[string]string{"region": "eu"}})}
	d := Step(t0.Add(time.Minute), s, State{Target: "v2", Stable: "v1"}, site("ap", 2, "v1", map[string]string{"region": "ap"}))
	assert.Equal(t, 2, d.Status.WaitingForWindow)
	assert.True(t, d.Status.NextWindow.IsZero(), "no window ever opens for them")
	assert.Equal(t, 0, countAssigned(d, "v2"))
}

func TestSetStrategyForgetsNodesWhenLabelsReadDiffer(t *testing.T) {
	s := Strategy{MaxUnavailable: schema.FromInt(1)}
	tr := trackerOver(s, State{Target: "v1"}, fleetOn(3, "v1"))
	tr.Step(t0)
	assert.False(t, tr.SetStrategy(Strategy{MaxUnavailable: schema.FromInt(2)}))
	assert.Equal(t, 3, tr.Len())
	withSites := Strategy{MaxUnavailable: schema.FromInt(2), Topology: &TopologyBudget{Key: "site", MaxUnavailable: schema.FromInt(1)}}
	assert.True(t, tr.SetStrategy(withSites))
	assert.Equal(t, 0, tr.Len(), "the nodes are Set again with their domains")
	assert.False(t, tr.SetStrategy(Strategy{MaxUnavailable: schema.FromInt(1), Topology: &TopologyBudget{Key: "site", MaxUnavailable: schema.FromInt(3)}}),
		"another budget over the same key reads the same labels")
	assert.True(t, tr.SetStrategy(Strategy{Windows: []window.Window{mustWindow(t, schema.MaintenanceWindow{Schedule: "@daily", Duration: "1h"})}}))
}

func TestFromSpecSchedule(t *testing.T) {
	spec := &schema.DaemonSetSpec{Rollout: &schema.RolloutPolicy{
		MaxUnavailablePerTopology: &schema.TopologyBudget{TopologyKey: "site", MaxUnavailable: ptr(schema.FromString("20%"))},
		MaintenanceWindows: []schema.MaintenanceWindow{
			{Schedule: "0 2 * * *", Duration: "2h", TimeZone: "Europe/Berlin"},
			{Schedule: "not a schedule", Duration: "1h"},
		},
	}}
	s := FromSpec(spec, time.Minute)
	require.NotNil(t, s.Topology)
	assert.Equal(t, TopologyBudget{Key: "site", MaxUnavailable: schema.FromString("20%")}, *s.Topology)
	require.Len(t, s.Windows, 2)
	assert.Equal(t, "Europe/Berlin", s.Windows[0].Spec().TimeZone)
	assert.Equal(t, window.State{}, s.Windows[1].At(t0), "an invalid window never opens")
}

// TestTrackerNodeChangesSite: a waiting node that moves to a site with
// room is updated there at the next step, as Step over every node does.
func TestTrackerNodeChangesSite(t *testing.T) {
	s := Strategy{MaxUnavailable: schema.FromString("100%"), Topology: &TopologyBudget{Key: "site", MaxUnavailable: schema.FromInt(1)}}
	nodes := append(site("a", 3, "v1", map[string]string{"site": "a"}), site("b", 1, "v1", map[string]string{"site": "b"})...)
	st := State{Target: "v2", Stable: "v1"}
	tr := trackerOver(s, st, nodes)
	d := tr.Step(t0)
	assert.Equal(t, map[string][]string{"a-0": {"v2"}, "b-0": {"v2"}}, d.Assign, "one per site")
	for name, revs := range d.Assign {
		for i := range nodes {
			if nodes[i].Name == name {
				nodes[i].Assigned = revs
				nodes[i].Observed = []Instance{notReady("v2", schema.PhasePending)}
				tr.Set(nodes[i])
			}
		}
	}
	tr.Step(t0)
	nodes[2].Labels = map[string]string{"site": "c"} // a-2 moves to a site of its own
	tr.Set(nodes[2])
	want := Step(t0, s, cloneState(tr.State()), nodes)
	got := tr.Step(t0)
	assert.Equal(t, []string{"v2"}, want.Assign["a-2"])
	assert.Equal(t, map[string][]string{"a-2": {"v2"}}, got.Assign)
	assert.Equal(t, want.Status, got.Status)
}
