package placement

import (
	"slices"
	"testing"
	"time"

	"github.com/edgeset/edgeset/schema"
)

// t0 is the instant every table test decides at.
var t0 = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

func daemonSet(spec schema.PodSpec) *schema.DaemonSet {
	return &schema.DaemonSet{
		Metadata: schema.ObjectMeta{Name: "agent", Namespace: "edge"},
		Spec:     schema.DaemonSetSpec{Template: schema.PodTemplateSpec{Spec: spec}},
	}
}

func mustCompile(t testing.TB, spec schema.PodSpec) *Policy {
	t.Helper()
	p, err := Compile(daemonSet(spec))
	if err != nil {
		t.Fatalf("Compile: %v", err)
	}
	return p
}

// node returns a node with the given labels, as key, value pairs.
func node(name string, kv ...string) schema.Node {
	n := schema.Node{Name: name, Labels: map[string]string{}}
	for i := 0; i+1 < len(kv); i += 2 {
		n.Labels[kv[i]] = kv[i+1]
	}
	return n
}

func withTaints(n schema.Node, ts ...schema.Taint) schema.Node {
	n.Taints = append(slices.Clone(n.Taints), ts...)
	return n
}

func taint(key, value, effect string) schema.Taint {
	return schema.Taint{Key: key, Value: value, Effect: effect}
}

func taintAddedAt(key, effect string, at time.Time) schema.Taint {
	return schema.Taint{Key: key, Effect: effect, TimeAdded: &at}
}

func expr(key, op string, values ...string) schema.NodeSelectorRequirement {
	return schema.NodeSelectorRequirement{Key: key, Operator: op, Values: values}
}

func terms(ts ...schema.NodeSelectorTerm) *schema.Affinity {
	return &schema.Affinity{NodeAffinity: &schema.NodeAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: &schema.NodeSelector{NodeSelectorTerms: ts},
	}}
}

func labelTerm(exprs ...schema.NodeSelectorRequirement) schema.NodeSelectorTerm {
	return schema.NodeSelectorTerm{MatchExpressions: exprs}
}

func fieldTerm(fields ...schema.NodeSelectorRequirement) schema.NodeSelectorTerm {
	return schema.NodeSelectorTerm{MatchFields: fields}
}

func tol(key, op, value, effect string) schema.Toleration {
	return schema.Toleration{Key: key, Operator: op, Value: value, Effect: effect}
}

func tolFor(key, op, effect string, seconds int64) schema.Toleration {
	return schema.Toleration{Key: key, Operator: op, Effect: effect, TolerationSeconds: &seconds}
}
