package rollout

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgeset/edgeset/schema"
)

// randomPrefetch gives s, at random, download before switch over the
// "site" label (which randomLabels sets) or the "region" one.
func randomPrefetch(rng *rand.Rand, s *Strategy) {
	if rng.IntN(2) == 0 {
		return
	}
	s.Prefetch = &Prefetch{Key: []string{"site", "region"}[rng.IntN(2)], MaxConcurrent: 1 + rng.IntN(3)}
}

// prefetchReport is what the tracker model's agent reports of its
// prefetches: mostly the one it is asked for, done; sometimes nothing,
// or a revision it was not asked for. Now and then its agent is upgraded
// or downgraded.
func (m *fleetModel) prefetchReport(n *Node) []string {
	if m.rng.IntN(20) == 0 {
		n.CanPrefetch = !n.CanPrefetch
	}
	switch r := m.rng.IntN(6); {
	case r < 3 && n.Prefetching != "":
		return []string{n.Prefetching}
	case r == 3 && len(m.revisions) > 1:
		return []string{m.revisions[m.rng.IntN(len(m.revisions))]}
	case r == 4:
		return n.Prefetched
	}
	return nil
}

// download lets a simulated agent fetch the revision it is asked to
// prefetch: it takes a few seconds (more on some nodes), and a revision
// it runs is present too.
func (sm *sim) download(n *simNode) {
	if n.images == nil {
		n.images = map[string]bool{}
	}
	for rev := range n.running {
		n.images[rev] = true
	}
	if n.prefetching == "" || n.images[n.prefetching] {
		return
	}
	took := time.Duration(2+len(n.name)%3+int(n.name[len(n.name)-1]%5)) * time.Second
	if !sm.now.Before(n.askedAt.Add(took)) {
		n.images[n.prefetching] = true
	}
}

// reportPrefetch is what the agent reports: the prefetch it is asked
// for, once done.
func (n *simNode) reportPrefetch() []string {
	if n.prefetching != "" && n.images[n.prefetching] {
		return []string{n.prefetching}
	}
	return nil
}

// ask records the controller's prefetch ask for n; the agent starts on a
// new one when it is online (its retained desired state reaches it on its
// return otherwise, which the download time covers).
func (sm *sim) ask(n *simNode, rev string) {
	if rev != n.prefetching {
		n.prefetching, n.askedAt = rev, sm.now
	}
}

// checkPrefetch asserts download before switch on one step: per site, no
// more reachable nodes downloading than the limit; no node that serves on
// an older revision and prefetches is moved to the target before it
// reported the target's images present; no node that cannot prefetch is
// asked to.
func (sm *sim) checkPrefetch(t *testing.T, in []Node, d Decision) {
	t.Helper()
	if sm.s.Prefetch == nil {
		require.Empty(t, d.Prefetch, "asks without prefetch")
		return
	}
	p := &pass{now: sm.now, s: sm.s, st: State{Target: d.State.Target}}
	downloading := map[string]int{}
	for i := range in {
		n := &in[i]
		v := p.viewOf(n)
		ask, asked := d.Prefetch[n.Name]
		require.False(t, asked && !n.CanPrefetch, "at %s: node %s asked to prefetch, its agent cannot", sm.now.Sub(t0), n.Name)
		done := slices.Contains(n.Prefetched, d.State.Target)
		if asked && !v.offline && !done {
			require.Equal(t, d.State.Target, ask, "node %s asked to prefetch another revision than the target", n.Name)
			downloading[sm.s.prefetchDomainOf(n.Labels)]++
		}
		switched := !slices.Contains(n.Assigned, d.State.Target) && slices.Contains(d.Assign[n.Name], d.State.Target)
		if switched && len(n.Assigned) > 0 && n.CanPrefetch && !v.offline && v.available && !sm.s.OnDelete {
			require.True(t, done, "at %s: node %s, serving %v, switched to %s before its prefetch was done (reported %v)",
				sm.now.Sub(t0), n.Name, n.Assigned, d.State.Target, n.Prefetched)
		}
	}
	for site, n := range downloading {
		require.LessOrEqual(t, n, sm.s.Prefetch.MaxConcurrent, "at %s: site %q has %d nodes downloading", sm.now.Sub(t0), site, n)
	}
	require.Equal(t, sumOf(downloading), d.Status.Prefetch.Downloading, "downloading count")
}

func sumOf(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// TestPropertyPrefetch: over random fleets spread over sites, strategies
// with download before switch (and budgets and windows), a fifth of the
// agents unable to prefetch, flapping links, nodes away for good, nodes
// moving to another site and late reports, no step has a site downloading on more nodes than the limit,
// no node switches before its download is done, and once the links heal
// every reachable node ends on the target.
func TestPropertyPrefetch(t *testing.T) {
	asked := 0
	for seed := uint64(1); seed <= 40; seed++ {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 17))
			s := randomStrategy(rng)
			randomSchedule(rng, &s)
			if len(s.Windows) > 0 { // every node has a window: the one without a selector
				s.Windows = append(s.Windows, mustWindows(schema.MaintenanceWindow{Schedule: "*/4 * * * *", Duration: "1m"})...)
			}
			s.Prefetch = &Prefetch{Key: "site", MaxConcurrent: 1 + rng.IntN(3)}
			sm := newSim(seed, 5+rng.IntN(40), s)
			for _, n := range sm.nodes {
				n.labels = randomLabels(rng)
				n.canPrefetch = rng.IntN(5) != 0
			}
			sm.flapProb = 0.02 * float64(rng.IntN(4))
			sm.lateProb = 0.2 * float64(rng.IntN(2))
			if rng.IntN(3) == 0 {
				sm.nodes[rng.IntN(len(sm.nodes))].permaAway = true
			}
			sm.st = sm.st.Retarget("v2")
			for i := range 200 {
				sm.tick()
				if i%4 == 0 { // a node moves to another site, with its ask
					sm.nodes[rng.IntN(len(sm.nodes))].labels = randomLabels(rng)
				}
				if d := sm.step(t); d.Status.Prefetch.Downloading > 0 {
					asked++
				}
			}
			sm.healLinks()
			for range 1500 {
				sm.tick()
				sm.step(t)
				if sm.converged("v2") {
					return
				}
			}
			t.Fatalf("not converged to v2 with strategy %+v; state %+v", sm.s, sm.st)
		})
	}
	assert.NotZero(t, asked, "no step ever had a download under way")
}

// prefetchFleet is n nodes of site s on v1, serving, whose agents
// prefetch.
func prefetchFleet(prefix string, n int, site string) []Node {
	out := site2(prefix, n, site)
	for i := range out {
		out[i].CanPrefetch = true
	}
	return out
}

func site2(prefix string, n int, s string) []Node {
	return site(prefix, n, "v1", map[string]string{"site": s})
}

func TestStepPrefetch(t *testing.T) {
	target := State{Target: "v2", Stable: "v1"}
	onePerSite := Strategy{MaxUnavailable: schema.FromInt(10), Prefetch: &Prefetch{Key: "site", MaxConcurrent: 1}}
	tests := []struct {
		name  string
		s     Strategy
		st    State
		nodes func() []Node
		// asks and switched are the nodes asked to prefetch and moved to
		// v2; phases counts the waiting ones.
		asks, switched []string
		status         func(t *testing.T, st Status)
	}{
		{"one download per site at a time, nobody switches", onePerSite, target,
			func() []Node { return append(prefetchFleet("a", 3, "a"), prefetchFleet("b", 2, "b")...) },
			[]string{"a-0", "b-0"}, nil,
			func(t *testing.T, st Status) {
				assert.Equal(t, 5, st.WaitingForPrefetch)
				assert.Equal(t, PrefetchCounts{Nodes: 5, Done: 0, Downloading: 2}, st.Prefetch)
			}},
		{"an ask is kept before the next in name order", onePerSite, target,
			func() []Node {
				n := prefetchFleet("a", 3, "a")
				n[2].Prefetching = "v2"
				return n
			},
			[]string{"a-2"}, nil, nil},
		{"done: switches, keeps its ask, frees the site", onePerSite, target,
			func() []Node {
				n := prefetchFleet("a", 3, "a")
				n[0].Prefetching, n[0].Prefetched = "v2", []string{"v2"}
				return n
			},
			[]string{"a-0", "a-1"}, []string{"a-0"},
			func(t *testing.T, st Status) {
				assert.Equal(t, 2, st.WaitingForPrefetch)
				assert.Equal(t, PrefetchCounts{Nodes: 3, Done: 1, Downloading: 1}, st.Prefetch)
			}},
		{"an agent that cannot prefetch switches without", onePerSite, target,
			func() []Node {
				n := prefetchFleet("a", 2, "a")
				n[1].CanPrefetch = false
				return n
			},
			[]string{"a-0"}, []string{"a-1"},
			func(t *testing.T, st Status) { assert.Equal(t, 1, st.Prefetch.Unsupported) }},
		{"an unavailable instance switches at once", onePerSite, target,
			func() []Node {
				n := prefetchFleet("a", 2, "a")
				n[0].Observed = []Instance{{Revision: "v1", Phase: schema.PhaseCrashLoopBackOff}}
				return n
			},
			[]string{"a-1"}, []string{"a-0"}, nil},
		{"an offline node holds no room and is asked nothing", Strategy{MaxUnavailable: schema.FromInt(1), OfflineGrace: time.Minute,
			Prefetch: &Prefetch{Key: "site", MaxConcurrent: 1}}, target,
			func() []Node {
				n := prefetchFleet("a", 2, "a")
				n[0].Online, n[0].OfflineSince, n[0].Prefetching = false, t0.Add(-time.Hour), "v2"
				return n
			},
			[]string{"a-1"}, nil, nil},
		{"paused: asks are kept, none made", Strategy{MaxUnavailable: schema.FromInt(1), Paused: true,
			Prefetch: &Prefetch{Key: "site", MaxConcurrent: 2}}, target,
			func() []Node {
				n := prefetchFleet("a", 3, "a")
				n[1].Prefetching = "v2"
				return n
			},
			[]string{"a-1"}, nil, nil},
		{"a site over the limit keeps the first asks by name", onePerSite, target,
			func() []Node {
				n := prefetchFleet("a", 3, "a")
				n[1].Prefetching, n[2].Prefetching = "v2", "v2"
				return n
			},
			[]string{"a-1"}, nil, nil},
		{"an ask of an older target is withdrawn", onePerSite, target,
			func() []Node {
				n := prefetchFleet("a", 2, "a")
				n[1].Prefetching = "v0"
				return n
			},
			[]string{"a-0"}, nil, nil},
		{"nodes without the label share one site", onePerSite, target,
			func() []Node {
				n := append(prefetchFleet("x", 2, "x"), prefetchFleet("y", 1, "y")...)
				for i := range n {
					n[i].Labels = map[string]string{"region": n[i].Name}
				}
				return n
			},
			[]string{"x-0"}, nil, nil},
		{"windows closed: downloads go on, switches wait", Strategy{MaxUnavailable: schema.FromInt(5),
			Windows:  mustWindows(schema.MaintenanceWindow{Schedule: "0 3 * * *", Duration: "1h"}),
			Prefetch: &Prefetch{Key: "site", MaxConcurrent: 5}}, target,
			func() []Node {
				n := prefetchFleet("a", 2, "a")
				n[0].Prefetching, n[0].Prefetched = "v2", []string{"v2"}
				return n
			},
			[]string{"a-0", "a-1"}, nil,
			func(t *testing.T, st Status) {
				assert.Equal(t, 2, st.WaitingForWindow)
				assert.Zero(t, st.WaitingForPrefetch)
			}},
		{"OnDelete: downloads, no gate", Strategy{OnDelete: true, Prefetch: &Prefetch{Key: "site", MaxConcurrent: 1}}, target,
			func() []Node { return prefetchFleet("a", 2, "a") },
			[]string{"a-0"}, nil,
			func(t *testing.T, st Status) {
				assert.Zero(t, st.WaitingForPrefetch)
				assert.Equal(t, 2, st.Waiting)
			}},
		{"without prefetch every ask is withdrawn", Strategy{MaxUnavailable: schema.FromInt(1)}, target,
			func() []Node {
				n := prefetchFleet("a", 2, "a")
				n[0].Prefetching = "v2"
				return n
			},
			nil, []string{"a-0"}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			nodes := tc.nodes()
			d := Step(t0, tc.s, tc.st, nodes)
			assert.Equal(t, tc.asks, sortedKeysOf(d.Prefetch), "asks")
			for node, rev := range d.Prefetch {
				assert.Equal(t, "v2", rev, "node %s", node)
			}
			var switched []string
			for _, n := range nodes {
				if slices.Contains(d.Assign[n.Name], "v2") {
					switched = append(switched, n.Name)
				}
			}
			assert.Equal(t, tc.switched, switched, "switched")
			if tc.status != nil {
				tc.status(t, d.Status)
			}
			tr := trackerOver(tc.s, tc.st, nodes)
			got := tr.Step(t0)
			assert.Equal(t, d.Status, got.Status, "the tracker's status")
		})
	}
}

func sortedKeysOf[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func TestFromSpecPrefetch(t *testing.T) {
	spec := func(r *schema.RolloutPolicy) *schema.DaemonSetSpec { return &schema.DaemonSetSpec{Rollout: r} }
	on := &schema.PrefetchPolicy{Enabled: true}

	s := FromSpec(spec(&schema.RolloutPolicy{Prefetch: on}), time.Minute)
	require.NotNil(t, s.Prefetch)
	assert.Equal(t, Prefetch{Key: "site", MaxConcurrent: schema.DefaultPrefetchConcurrency, keyDefaulted: true}, *s.Prefetch)
	s.UseSiteLabel("edgeset.io/site")
	assert.Equal(t, "edgeset.io/site", s.Prefetch.Key, "the controller's site-label where the spec names none")

	s = FromSpec(spec(&schema.RolloutPolicy{Prefetch: on,
		MaxUnavailablePerTopology: &schema.TopologyBudget{TopologyKey: "building", MaxUnavailable: ptr(schema.FromInt(1))}}), time.Minute)
	s.UseSiteLabel("edgeset.io/site")
	assert.Equal(t, "building", s.Prefetch.Key, "the per-site budget's key")

	s = FromSpec(spec(&schema.RolloutPolicy{Prefetch: &schema.PrefetchPolicy{Enabled: true, TopologyKey: "cell", MaxConcurrentPerSite: ptr(int32(4))}}), time.Minute)
	s.UseSiteLabel("edgeset.io/site")
	assert.Equal(t, Prefetch{Key: "cell", MaxConcurrent: 4}, *s.Prefetch)

	assert.Nil(t, FromSpec(spec(&schema.RolloutPolicy{Prefetch: &schema.PrefetchPolicy{}}), time.Minute).Prefetch, "prefetch: false")

	a := FromSpec(spec(&schema.RolloutPolicy{Prefetch: on}), time.Minute)
	b := FromSpec(spec(&schema.RolloutPolicy{Prefetch: &schema.PrefetchPolicy{Enabled: true, MaxConcurrentPerSite: ptr(int32(5))}}), time.Minute)
	assert.True(t, SameNodeFacts(a, b), "another limit reads the same labels")
	assert.False(t, ScheduleEqual(a, b), "but is another schedule")
	b.UseSiteLabel("zone")
	assert.False(t, SameNodeFacts(a, b), "another key reads another label")
}
