package reconcile

import (
	"testing"
	"time"

	"github.com/edgeset/edgeset/controller/placement"
	"github.com/edgeset/edgeset/schema"
)

var t0 = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

func at(d time.Duration) time.Time { return t0.Add(d) }

func ptr[T any](v T) *T { return &v }

// dsSpec describes a test daemonset.
type dsSpec struct {
	name        string
	selector    map[string]string
	tolerations []schema.Toleration
	affinity    *schema.Affinity
	revision    string
	minReady    int32
}

// compile builds the DaemonSetState of spec with a real placement policy.
func compile(t testing.TB, spec dsSpec) DaemonSetState {
	t.Helper()
	ds := &schema.DaemonSet{
		TypeMeta: schema.TypeMeta{APIVersion: schema.APIVersionApps, Kind: schema.KindDaemonSet},
		Metadata: schema.ObjectMeta{Name: spec.name, Namespace: "default"},
		Spec: schema.DaemonSetSpec{
			MinReadySeconds: spec.minReady,
			Template: schema.PodTemplateSpec{Spec: schema.PodSpec{
				NodeSelector: spec.selector,
				Affinity:     spec.affinity,
				Tolerations:  spec.tolerations,
				Containers:   []schema.Container{{Name: "c", Image: "busybox"}},
			}},
		},
	}
	p, err := placement.Compile(ds)
	if err != nil {
		t.Fatalf("compile %s: %v", spec.name, err)
	}
	rev := spec.revision
	if rev == "" {
		rev = "r1"
	}
	return DaemonSetState{Key: ds.Key(), Policy: p, CurrentRevision: rev, MinReadySeconds: spec.minReady}
}

func node(name string, labels map[string]string, taints ...schema.Taint) schema.Node {
	return schema.Node{Name: name, Labels: labels, Taints: taints}
}

func inst(ds, rev string) schema.DesiredInstance {
	return schema.DesiredInstance{DaemonSet: "default/" + ds, Revision: rev}
}

func desired(gen uint64, instances ...schema.DesiredInstance) NodeDesired {
	if instances == nil {
		instances = []schema.DesiredInstance{}
	}
	return NodeDesired{Generation: gen, Instances: instances}
}

// apply returns current updated with out, as the controller applies it
// after publishing.
func apply(current map[string]NodeDesired, out Output) map[string]NodeDesired {
	next := make(map[string]NodeDesired, len(current))
	for k, v := range current {
		next[k] = v
	}
	for k, v := range out.Desired {
		next[k] = v
	}
	for _, k := range out.Forget {
		delete(next, k)
	}
	return next
}

// keys returns the changes as "node ds reason" strings.
func keys(cs []Change) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c.Node+" "+c.DaemonSet+" "+c.Reason)
	}
	return out
}
