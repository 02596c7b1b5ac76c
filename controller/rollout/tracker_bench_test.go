package rollout

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/edgeset/edgeset/schema"
)

// benchFleet is n nodes that run revision v1, ready, after a completed
// rollout: the state records when each was assigned it.
func benchFleet(n int) (Strategy, State, []Node) {
	s := Strategy{MaxUnavailable: schema.FromString("10%"), OfflineGrace: 5 * time.Minute}
	st := State{Target: "v1", Stable: "v1", Complete: true}
	nodes := make([]Node, n)
	for i := range nodes {
		name := fmt.Sprintf("node-%06d", i)
		nodes[i] = Node{Name: name, Online: true, Assigned: []string{"v1"},
			Observed: []Instance{{Revision: "v1", Ready: true, ReadySince: t0, Phase: schema.PhaseRunning}}}
		st.setAssigned(name, t0)
	}
	return s, st, nodes
}

func benchTracker(b *testing.B, n int) (*Tracker, []Node, time.Time) {
	s, st, nodes := benchFleet(n)
	tr := NewTracker(s, st)
	for _, node := range nodes {
		tr.Set(node)
	}
	now := t0.Add(time.Hour)
	if d := tr.Step(now); !d.Status.Complete || len(d.Assign) != 0 {
		b.Fatalf("fleet not steady: %+v", d.Status)
	}
	return tr, nodes, now
}

// BenchmarkTrackerOneNode: a steady fleet (rollout complete), one node's
// facts change, then Step. restart: a node's instance goes not ready and,
// at the next op, ready again; join: a node joins with nothing assigned
// and, at the next op, leaves. The cost must not grow with the fleet.
func BenchmarkTrackerOneNode(b *testing.B) {
	for _, n := range []int{10_000, 100_000} {
		b.Run(fmt.Sprintf("nodes=%d/restart", n), func(b *testing.B) {
			tr, nodes, now := benchTracker(b, n)
			full := 0
			for i := 0; b.Loop(); i++ {
				node := nodes[(i/2)%n]
				in := node.Observed[0]
				in.Ready, in.ReadySince = i%2 == 1, now
				node.Observed = []Instance{in}
				tr.Set(node)
				if tr.Step(now).Full {
					full++
				}
			}
			b.ReportMetric(float64(full)/float64(b.N), "full/op")
		})
		b.Run(fmt.Sprintf("nodes=%d/join", n), func(b *testing.B) {
			tr, _, now := benchTracker(b, n)
			full := 0
			for i := 0; b.Loop(); i++ {
				if i%2 == 0 {
					tr.Set(Node{Name: "joiner", Online: true})
				} else {
					tr.Remove("joiner")
				}
				if tr.Step(now).Full {
					full++
				}
			}
			b.ReportMetric(float64(full)/float64(b.N), "full/op")
		})
	}
}

// BenchmarkStepFull: Step over every node of a steady 100,000-node fleet,
// what the controller ran per daemonset per pass before the Tracker.
func BenchmarkStepFull(b *testing.B) {
	s, st, nodes := benchFleet(100_000)
	now := t0.Add(time.Hour)
	for b.Loop() {
		Step(now, s, st, nodes)
	}
}

// BenchmarkTrackerMemory reports the heap a 100,000-node tracker holds per
// member: the state's maps alone (state), the members' facts and index
// after Set (facts), and everything after the first Step (total: state,
// facts, parts, queue).
func BenchmarkTrackerMemory(b *testing.B) {
	const n = 100_000
	s, st, nodes := benchFleet(n)
	var state, facts, total float64
	for b.Loop() {
		base := heapInUse()
		tr := NewTracker(s, st) // copies the state
		afterState := heapInUse()
		for _, node := range nodes {
			tr.Set(node)
		}
		afterSet := heapInUse()
		tr.Step(t0.Add(time.Hour))
		afterStep := heapInUse()
		runtime.KeepAlive(tr)
		state = float64(afterState-base) / n
		facts = float64(afterSet-afterState) / n
		total = float64(afterStep-base) / n
	}
	b.ReportMetric(state, "state-B/member")
	b.ReportMetric(facts, "facts-B/member")
	b.ReportMetric(total, "total-B/member")
	runtime.KeepAlive(nodes)
}

func heapInUse() int64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}

// BenchmarkTrackerRollingUpdate: a 100,000-node fleet rolling out a new
// revision with maxUnavailable 10% and instant agents. Each op is one
// updating node reporting its new instance ready, then Step; the
// controller publishes what the step moved (Set with the new assignment,
// not yet ready). When a rollout completes the next revision starts (a
// retarget: that step visits every node; full/op says how often).
func BenchmarkTrackerRollingUpdate(b *testing.B) {
	tr, _, now := benchTracker(b, 100_000)
	var updating []Node
	publish := func(d Delta) {
		for name, revs := range d.Assign {
			n := Node{Name: name, Online: true, Assigned: revs}
			tr.Set(n)
			updating = append(updating, n)
		}
	}
	revision, full := 1, 0
	for b.Loop() {
		if len(updating) == 0 {
			revision++
			tr.SetState(tr.State().Retarget(fmt.Sprint("v", revision)))
		} else {
			n := updating[0]
			updating = updating[1:]
			n.Observed = []Instance{{Revision: n.Assigned[0], Ready: true, ReadySince: now, Phase: schema.PhaseRunning}}
			tr.Set(n)
		}
		d := tr.Step(now)
		if d.Full {
			full++
		}
		publish(d)
	}
	b.ReportMetric(float64(full)/float64(b.N), "full/op")
	b.ReportMetric(float64(revision-1), "rollouts")
}

// BenchmarkTrackerRollingUpdateSites is BenchmarkTrackerRollingUpdate over
// 100,000 nodes in 1,000 sites of 100, named so that consecutive names are
// in different sites (the order in which a batch passes over the nodes of
// full sites the most), with maxUnavailablePerTopology 1 on top of the
// global 10%: at most 1,000 nodes in flight, one per site.
func BenchmarkTrackerRollingUpdateSites(b *testing.B) {
	const n, sites = 100_000, 1_000
	s, st, nodes := benchFleet(n)
	s.Topology = &TopologyBudget{Key: "site", MaxUnavailable: schema.FromInt(1)}
	for i := range nodes {
		nodes[i].Labels = map[string]string{"site": fmt.Sprintf("site-%04d", i%sites)}
	}
	tr := NewTracker(s, st)
	for _, node := range nodes {
		tr.Set(node)
	}
	now := t0.Add(time.Hour)
	tr.Step(now)
	labels := make(map[string]map[string]string, n)
	for _, node := range nodes {
		labels[node.Name] = node.Labels
	}
	var updating []Node
	revision, full, inFlight := 1, 0, 0
	for b.Loop() {
		if len(updating) == 0 {
			revision++
			tr.SetState(tr.State().Retarget(fmt.Sprint("v", revision)))
		} else {
			node := updating[0]
			updating = updating[1:]
			node.Observed = []Instance{{Revision: node.Assigned[0], Ready: true, ReadySince: now, Phase: schema.PhaseRunning}}
			tr.Set(node)
		}
		d := tr.Step(now)
		if d.Full {
			full++
		}
		for name, revs := range d.Assign {
			node := Node{Name: name, Online: true, Assigned: revs, Labels: labels[name]}
			tr.Set(node)
			updating = append(updating, node)
		}
		inFlight = max(inFlight, d.Status.Unavailable)
	}
	b.ReportMetric(float64(full)/float64(b.N), "full/op")
	b.ReportMetric(float64(inFlight), "max-unavailable")
	b.ReportMetric(float64(revision-1), "rollouts")
}

// BenchmarkStepFullSites is BenchmarkStepFull with a per-site budget and a
// maintenance window over 1,000 sites.
func BenchmarkStepFullSites(b *testing.B) {
	s, st, nodes := benchFleet(100_000)
	s.Topology = &TopologyBudget{Key: "site", MaxUnavailable: schema.FromInt(1)}
	s.Windows = mustWindows(schema.MaintenanceWindow{Schedule: "0 2 * * *", Duration: "2h", TimeZone: "Europe/Berlin"})
	for i := range nodes {
		nodes[i].Labels = map[string]string{"site": fmt.Sprintf("site-%04d", i%1000)}
	}
	now := t0.Add(time.Hour)
	for b.Loop() {
		Step(now, s, st, nodes)
	}
}
