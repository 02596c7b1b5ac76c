package registry

import (
	"fmt"
	"testing"
	"time"

	"github.com/edgeset/edgeset/schema"
)

// BenchmarkSnapshot10k builds the effective model of 10,000 nodes with
// kubelet-like labels, two conditions, an override on every tenth node and
// every fiftieth node offline past its grace period.
func BenchmarkSnapshot10k(b *testing.B) {
	r := New()
	for i := range 10_000 {
		name := fmt.Sprintf("node-%05d", i)
		r.ApplyStatus(schema.NodeStatus{
			SchemaVersion: schema.WireVersion,
			Node:          name,
			Labels: map[string]string{schema.LabelHostname: name, schema.LabelOS: "linux",
				schema.LabelArch: "arm64", "zone": fmt.Sprintf("z%d", i%10), "role": "edge"},
			Conditions: []schema.NodeCondition{
				{Type: schema.NodeReady, Status: schema.ConditionTrue, Since: t0},
				{Type: schema.NodeDiskPressure, Status: schema.ConditionFalse, Since: t0},
			},
			Capacity: schema.ResourceList{"cpu": "4", "memory": "2Gi"},
		}, t0)
		r.ApplyPresence(schema.Presence{Node: name, Online: i%50 != 0, Session: 1}, t0)
		if i%10 == 0 {
			r.SetOverrides(name, Overrides{Labels: map[string]*string{"tier": ptr("gold")}, Unschedulable: ptr(true)}, t0)
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		nodes, _ := r.Snapshot(t0.Add(time.Hour), grace)
		if len(nodes) != 10_000 {
			b.Fatalf("snapshot has %d nodes", len(nodes))
		}
	}
}
