package reconcile

import (
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/edgeset/edgeset/schema"
)

// benchFleet builds n nodes with kubelet-like labels (5% under maintenance,
// 2% unreachable, 10% cordoned) and 20 daemonsets mixing fleet-wide ones,
// node selectors, required node affinity and tolerations, every node
// online and reporting each of its instances ready.
func benchFleet(b testing.TB, n int) Input {
	in := Input{Now: t0, Observed: make(map[string]schema.ObservedState, n), Online: make(map[string]bool, n)}
	for i := range n {
		name := fmt.Sprintf("node-%05d", i)
		nd := schema.Node{Name: name, Labels: map[string]string{
			schema.LabelHostname: name,
			schema.LabelOS:       "linux",
			schema.LabelArch:     []string{"amd64", "arm64", "arm"}[i%3],
			"zone":               fmt.Sprintf("z%d", i%10),
			"site":               fmt.Sprintf("site-%03d", i%100),
			"role":               []string{"edge", "gateway", "camera"}[i%3],
			"tier":               []string{"gold", "silver"}[i%2],
			"cpus":               fmt.Sprint(1 + i%8),
		}, Unschedulable: i%10 == 0}
		if i%20 == 0 {
			nd.Taints = append(nd.Taints, schema.Taint{Key: "maintenance", Effect: schema.TaintNoSchedule})
		}
		if i%50 == 0 {
			nd.Taints = append(nd.Taints, schema.Taint{Key: schema.TaintNodeUnreachable, Effect: schema.TaintNoExecute, TimeAdded: ptr(at(-time.Hour))})
		}
		in.Nodes = append(in.Nodes, nd)
		in.Online[name] = true
	}
	for i := range 20 {
		s := dsSpec{name: fmt.Sprintf("daemon-%02d", i), revision: fmt.Sprintf("rev%02d", i)}
		switch i % 4 {
		case 1:
			s.selector = map[string]string{schema.LabelOS: "linux", "role": "edge"}
		case 2:
			s.affinity = &schema.Affinity{NodeAffinity: &schema.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &schema.NodeSelector{
				NodeSelectorTerms: []schema.NodeSelectorTerm{{MatchExpressions: []schema.NodeSelectorRequirement{
					{Key: schema.LabelArch, Operator: schema.NodeOpIn, Values: []string{"arm64", "arm"}},
					{Key: "cpus", Operator: schema.NodeOpGt, Values: []string{"2"}},
				}}}}}}
		case 3:
			s.tolerations = []schema.Toleration{{Key: "maintenance", Operator: schema.TolerationOpExists, Effect: schema.TaintNoSchedule}}
		}
		in.DaemonSets = append(in.DaemonSets, compile(b, s))
	}
	return in
}

// observeAll makes every node report each desired instance ready.
func observeAll(in *Input, current map[string]NodeDesired) {
	since := at(-time.Hour)
	for name, d := range current {
		o := schema.ObservedState{Node: name, ObservedGeneration: d.Generation}
		for _, i := range d.Instances {
			o.Instances = append(o.Instances, schema.InstanceStatus{DaemonSet: i.DaemonSet, Revision: i.Revision,
				Phase: schema.PhaseRunning, Ready: true, ReadySince: &since})
		}
		in.Observed[name] = o
	}
}

// BenchmarkPlan10k plans 10,000 nodes against 20 daemonsets: "initial"
// publishes every node for the first time, "steady" finds nothing to change
// (the common pass), "rollout" moves every node to a new revision of one
// daemonset.
func BenchmarkPlan10k(b *testing.B) {
	in := benchFleet(b, 10_000)
	first := Plan(in)
	steady := in
	steady.Current = apply(nil, first)
	steady.Observed = make(map[string]schema.ObservedState, len(steady.Current))
	observeAll(&steady, steady.Current)
	rollout := steady
	rollout.DaemonSets = append([]DaemonSetState(nil), steady.DaemonSets...)
	rollout.DaemonSets[0].CurrentRevision = "rev00-new"

	for _, bc := range []struct {
		name string
		in   Input
	}{{"initial", in}, {"steady", steady}, {"rollout", rollout}} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			var out Output
			cpu := cpuTime(b)
			for b.Loop() {
				out = Plan(bc.in)
			}
			// On a shared machine wall time includes waiting for a core;
			// CPU time (all threads, GC included) is the honest cost.
			b.ReportMetric(float64((cpuTime(b)-cpu).Nanoseconds())/float64(b.N), "cpu-ns/op")
			b.ReportMetric(float64(len(out.Desired)), "changed-nodes")
		})
	}
}

// cpuTime returns the CPU time (user and system) the process has used.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatalf("getrusage: %v", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkPlaceAssembleOneNode plans one node against the 20 daemonsets of
// benchFleet with a reused Planner, Placement and NodeResult, cycling over
// 100 nodes of the fleet's mix: "steady" finds nothing to change and must
// not allocate, "rollout" moves the node to a new revision of one
// daemonset.
func BenchmarkPlaceAssembleOneNode(b *testing.B) {
	in := benchFleet(b, 100)
	in.Current = apply(nil, Plan(in))
	observeAll(&in, in.Current)
	rollout := append([]DaemonSetState(nil), in.DaemonSets...)
	rollout[0].CurrentRevision = "rev00-new"

	for _, bc := range []struct {
		name       string
		daemonsets []DaemonSetState
	}{{"steady", in.DaemonSets}, {"rollout", rollout}} {
		b.Run(bc.name, func(b *testing.B) {
			p := NewPlanner(in.Now, bc.daemonsets, in.Configs)
			var pl Placement
			var res NodeResult
			b.ReportAllocs()
			changed, i := 0, 0
			for b.Loop() {
				node := &in.Nodes[i%len(in.Nodes)]
				i++
				p.Place(node, in.Current[node.Name], &pl)
				p.Assemble(&pl, true, p.CurrentRevision, in.Observed[node.Name].Instances, in.Online[node.Name], &res)
				if res.Changed {
					changed++
				}
			}
			b.ReportMetric(float64(changed)/float64(b.N), "changed/op")
		})
	}
}
