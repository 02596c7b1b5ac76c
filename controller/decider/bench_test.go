package decider

import (
	"fmt"
	"testing"
	"time"

	"github.com/edgeset/edgeset/controller/placement"
	"github.com/edgeset/edgeset/controller/reconcile"
	"github.com/edgeset/edgeset/controller/rollout"
	"github.com/edgeset/edgeset/schema"
)

// benchDecider is a decider over n nodes and 20 daemonsets (fleet-wide
// ones and node selectors), every decision applied and every instance
// reported ready, until nothing is left to decide.
func benchDecider(b *testing.B, n int, report bool) (*Decider, map[string]Node, time.Time) {
	d := New()
	now := t0
	for i := range 20 {
		spec := schema.DaemonSetSpec{Template: schema.PodTemplateSpec{Spec: schema.PodSpec{
			Containers: []schema.Container{{Name: "c", Image: "busybox"}}}}}
		switch i % 4 {
		case 1:
			spec.Template.Spec.NodeSelector = map[string]string{"role": "gateway"}
		case 2:
			spec.Template.Spec.NodeSelector = map[string]string{"tier": "gold"}
		}
		if i == 0 {
			spec.Template.Spec.NodeSelector = map[string]string{"extra": "on"}
		}
		spec.UpdateStrategy.RollingUpdate = &schema.RollingUpdateDaemonSet{MaxUnavailable: ptr(schema.FromString("10%"))}
		ds := &schema.DaemonSet{Metadata: schema.ObjectMeta{Name: fmt.Sprintf("daemon-%02d", i), Namespace: "fleet"}, Spec: spec}
		p, err := placement.Compile(ds)
		if err != nil {
			b.Fatal(err)
		}
		d.SetDaemonSet(DaemonSet{Key: ds.Key(), Policy: p, Revision: fmt.Sprintf("rev-%02d", i), Strategy: rollout.FromSpec(&spec, 40*time.Second)})
	}
	nodes := make(map[string]Node, n)
	for i := range n {
		name := fmt.Sprintf("node-%06d", i)
		m := &schema.Node{Name: name, Labels: map[string]string{"role": "gateway", "tier": []string{"gold", "silver"}[i%2]}}
		nodes[name] = Node{Name: name, Model: m, Online: true}
		d.SetNode(nodes[name])
	}
	for round := 0; d.Pending(); round++ {
		if round > 5 {
			b.Fatal("the bench fleet does not settle")
		}
		dec := d.Decide(now)
		for name, nd := range dec.Desired {
			nodes[name] = published(nodes[name], nd, now, report)
			d.Commit(name, nd)
			d.SetNode(nodes[name])
		}
		now = now.Add(time.Second)
	}
	return d, nodes, now
}

// published is n after publishing nd to it and, with report, its agent
// reporting every instance ready.
func published(n Node, nd reconcile.NodeDesired, now time.Time, report bool) Node {
	n.Current, n.HasCurrent = nd, true
	if !report {
		return n
	}
	n.Observed = nil
	for _, in := range nd.Instances {
		n.Observed = append(n.Observed, schema.InstanceStatus{DaemonSet: in.DaemonSet, Revision: in.Revision,
			Phase: schema.PhaseRunning, Ready: true, ReadySince: ptr(now)})
	}
	return n
}

// BenchmarkDecideNodeEvent: one node's label change (it gains or loses
// daemon-00) decided in a settled fleet, the decision applied and the
// agent's report decided too, at 10,000 and 100,000 nodes: the cost must
// not grow with the fleet. Without reports, every instance stays pending
// (agents that never answer), which rollouts track per node.
func BenchmarkDecideNodeEvent(b *testing.B) {
	for _, bc := range []struct {
		n      int
		report bool
	}{{10_000, true}, {100_000, true}, {10_000, false}, {100_000, false}} {
		b.Run(fmt.Sprintf("nodes=%d/reports=%t", bc.n, bc.report), func(b *testing.B) {
			d, nodes, now := benchDecider(b, bc.n, bc.report)
			name := "node-000007"
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				node := nodes[name]
				m := *node.Model
				m.Labels = map[string]string{"role": "gateway", "tier": "silver"}
				if i%2 == 0 {
					m.Labels["extra"] = "on"
				}
				i++
				node.Model = &m
				d.SetNode(node)
				dec := d.Decide(now)
				nd, ok := dec.Desired[name]
				if !ok {
					b.Fatal("the label change changed nothing")
				}
				node = published(node, nd, now, bc.report)
				d.Commit(name, nd)
				d.SetNode(node)
				d.Decide(now)
				nodes[name] = node
			}
		})
	}
}

// BenchmarkDecideApplyAll: in a settled fleet of 10,000 or 100,000 nodes
// x 20 daemonsets, the decision that places a 21st daemonset every node
// runs (the desired state of every node changes).
func BenchmarkDecideApplyAll(b *testing.B) {
	for _, n := range []int{10_000, 100_000} {
		b.Run(fmt.Sprintf("nodes=%d", n), func(b *testing.B) {
			d, _, now := benchDecider(b, n, true)
			spec := schema.DaemonSetSpec{Template: schema.PodTemplateSpec{Spec: schema.PodSpec{
				Containers: []schema.Container{{Name: "c", Image: "exporter"}}}}}
			ds := &schema.DaemonSet{Metadata: schema.ObjectMeta{Name: "exporter", Namespace: "fleet"}, Spec: spec}
			p, err := placement.Compile(ds)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				d.SetDaemonSet(DaemonSet{Key: ds.Key(), Policy: p, Revision: "exporter-1", Strategy: rollout.FromSpec(&spec, 40*time.Second)})
				if dec := d.Decide(now); len(dec.Desired) != n {
					b.Fatalf("%d desired states changed, want %d", len(dec.Desired), n)
				}
				b.StopTimer()
				d.RemoveDaemonSet(ds.Key())
				d.Decide(now) // back to the settled fleet (not committed: the next apply changes every node again)
				b.StartTimer()
			}
		})
	}
}

// BenchmarkDecideFull: the full pass's decision, from scratch, over a
// settled fleet of 10,000 or 100,000 nodes x 20 daemonsets: a new
// decider given every daemonset and node, then one decision.
func BenchmarkDecideFull(b *testing.B) {
	for _, n := range []int{10_000, 100_000} {
		b.Run(fmt.Sprintf("nodes=%d", n), func(b *testing.B) {
			settled, nodes, now := benchDecider(b, n, true)
			b.ReportAllocs()
			for b.Loop() {
				d := New()
				for _, ds := range settled.ds {
					d.SetDaemonSet(ds.DaemonSet)
				}
				for _, node := range nodes {
					d.SetNode(node)
				}
				d.MarkAll()
				if dec := d.Decide(now); len(dec.Desired) != 0 {
					b.Fatalf("a full decision over a settled fleet changed %d desired states", len(dec.Desired))
				}
			}
		})
	}
}
