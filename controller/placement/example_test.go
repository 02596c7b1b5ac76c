package placement_test

import (
	"fmt"
	"time"

	"github.com/edgeset/edgeset/controller/placement"
	"github.com/edgeset/edgeset/schema"
)

func ExamplePolicy_Decide() {
	ds := &schema.DaemonSet{
		Metadata: schema.ObjectMeta{Name: "modbus-gateway"},
		Spec: schema.DaemonSetSpec{Template: schema.PodTemplateSpec{Spec: schema.PodSpec{
			NodeSelector: map[string]string{"site": "a"},
			Affinity: &schema.Affinity{NodeAffinity: &schema.NodeAffinity{
				RequiredDuringSchedulingIgnoredDuringExecution: &schema.NodeSelector{
					NodeSelectorTerms: []schema.NodeSelectorTerm{{MatchExpressions: []schema.NodeSelectorRequirement{
						{Key: "arch", Operator: schema.NodeOpIn, Values: []string{"arm64"}},
					}}},
				},
			}},
		}}},
	}
	policy, err := placement.Compile(ds)
	if err != nil {
		panic(err)
	}
	now := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	for _, node := range []schema.Node{
		{Name: "gw-1", Labels: map[string]string{"site": "a", "arch": "arm64"}, Unschedulable: true},
		{Name: "gw-2", Labels: map[string]string{"site": "b", "arch": "amd64"}},
	} {
		d := policy.Decide(&node, now)
		fmt.Println(node.Name, d.ShouldRun, d.ShouldContinueRunning, d.Reason, d.Reasons())
	}
	// Output:
	// gw-1 true true None []
	// gw-2 false false NodeSelectorMismatch [node selector: label "site" is "b", want "a" node affinity: no term matched (term 0: "arch" In [arm64]: label is "amd64")]
}
