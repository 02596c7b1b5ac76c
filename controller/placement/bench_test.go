package placement

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/edgeset/edgeset/schema"
)

const (
	benchNodes      = 100_000
	benchDaemonSets = 20
	benchSites      = 500
)

// benchFleet returns a fleet shaped like a real edge deployment: sites of
// gateways, sensor hubs, cameras and kiosks on a few hardware platforms,
// a few percent of them tainted, cordoned, under pressure or unreachable.
func benchFleet(n int) []schema.Node {
	r := rand.New(rand.NewPCG(7, 7))
	added := t0.Add(-2 * time.Minute)
	hardware := []struct{ hw, arch, ram string }{
		{"rpi4", "arm64", "4"}, {"rpi5", "arm64", "8"}, {"jetson", "arm64", "16"},
		{"nuc", "amd64", "16"}, {"ipc", "amd64", "8"}, {"imx6", "arm", "1"},
	}
	roles := []string{"gateway", "gateway", "sensor-hub", "sensor-hub", "camera", "kiosk"}
	nodes := make([]schema.Node, n)
	for i := range nodes {
		h := hardware[r.IntN(len(hardware))]
		name := fmt.Sprintf("edge-%06d", i)
		nd := schema.Node{Name: name, Labels: map[string]string{
			schema.LabelHostname:     name,
			schema.LabelOS:           "linux",
			schema.LabelArch:         h.arch,
			schema.LabelAgentVersion: "0.4.1",
			"site":                   "site-" + strconv.Itoa(r.IntN(benchSites)),
			"role":                   roles[r.IntN(len(roles))],
			"hardware":               h.hw,
			"ram-gb":                 h.ram,
		}}
		if h.hw == "jetson" {
			nd.Labels["gpu"] = "nvidia"
		}
		switch p := r.IntN(100); {
		case p < 5:
			nd.Taints = []schema.Taint{{Key: "dedicated", Value: "camera", Effect: schema.TaintNoSchedule}}
		case p < 7:
			nd.Taints = []schema.Taint{{Key: schema.TaintNodeUnreachable, Effect: schema.TaintNoExecute, TimeAdded: &added}}
		case p < 8:
			nd.Taints = []schema.Taint{{Key: schema.TaintNodeDiskPressure, Effect: schema.TaintNoSchedule}}
		case p < 9:
			nd.Unschedulable = true
		case p < 10:
			nd.Taints = []schema.Taint{{Key: "maintenance", Effect: schema.TaintNoExecute, TimeAdded: &added}}
		}
		if r.IntN(100) < 3 {
			nd.Labels["edgeset.io/maintenance"] = "true"
		}
		nodes[i] = nd
	}
	return nodes
}

// benchDaemonSetSpecs returns the daemons of a fleet: some everywhere, some
// by role, hardware or site, with the operators and tolerations real
// manifests use.
func benchDaemonSetSpecs() []schema.PodSpec {
	arm := terms(labelTerm(expr(schema.LabelArch, "In", "arm64", "arm")))
	gpu := terms(labelTerm(expr("gpu", "Exists"), expr("ram-gb", "Gt", "8")))
	notMaint := terms(labelTerm(expr("edgeset.io/maintenance", "DoesNotExist"), expr(schema.LabelArch, "NotIn", "arm")))
	someSites := make([]string, 40)
	for i := range someSites {
		someSites[i] = "site-" + strconv.Itoa(i*7)
	}
	everything := []schema.Toleration{tol("", "Exists", "", "")}
	camera := []schema.Toleration{tol("dedicated", "Equal", "camera", "NoSchedule")}
	flaky := []schema.Toleration{tolFor("maintenance", "Exists", "NoExecute", 300)}
	return []schema.PodSpec{
		{Tolerations: everything},                    // log shipper
		{Tolerations: everything, HostNetwork: true}, // node exporter
		{}, // security agent
		{NodeSelector: map[string]string{"role": "gateway"}},
		{NodeSelector: map[string]string{"role": "gateway", schema.LabelOS: "linux"}, HostNetwork: true},
		{NodeSelector: map[string]string{"role": "camera"}, Tolerations: camera},
		{NodeSelector: map[string]string{"role": "sensor-hub"}, Affinity: arm},
		{Affinity: gpu, Tolerations: camera},
		{Affinity: notMaint},
		{Affinity: terms(labelTerm(expr("site", "In", someSites...)))},
		{Affinity: terms(labelTerm(expr("hardware", "In", "rpi4", "rpi5")), labelTerm(expr("hardware", "In", "imx6")))},
		{Affinity: terms(labelTerm(expr("ram-gb", "Gt", "2"), expr("role", "NotIn", "kiosk")))},
		{Affinity: terms(labelTerm(expr("ram-gb", "Lt", "8")))},
		{NodeSelector: map[string]string{"hardware": "nuc"}, Tolerations: flaky},
		{Affinity: terms(fieldTerm(expr(FieldNodeName, "NotIn", "edge-000042")))},
		{Affinity: terms(labelTerm(expr(schema.LabelAgentVersion, "In", "0.4.0", "0.4.1")))},
		{NodeSelector: map[string]string{"site": "site-17"}},
		{Tolerations: flaky},
		{Affinity: terms(labelTerm(expr("role", "In", "kiosk", "camera"), expr("ram-gb", "Gt", "1"))), Tolerations: camera},
		{Affinity: terms(labelTerm(expr(schema.LabelOS, "In", "linux"), expr("gpu", "DoesNotExist")))},
	}
}

func benchPolicies(b *testing.B) []*Policy {
	specs := benchDaemonSetSpecs()
	if len(specs) != benchDaemonSets {
		b.Fatalf("%d daemonsets, want %d", len(specs), benchDaemonSets)
	}
	out := make([]*Policy, len(specs))
	for i, spec := range specs {
		out[i] = mustCompile(b, spec)
	}
	return out
}

// BenchmarkDecide decides 20 daemonsets on 100,000 nodes per iteration,
// node by node (as a pass over the fleet does) and daemonset by daemonset
// (as a changed daemonset does).
func BenchmarkDecide(b *testing.B) {
	nodes := benchFleet(benchNodes)
	policies := benchPolicies(b)
	b.Run("node-major", func(b *testing.B) {
		benchDecisions(b, len(nodes)*len(policies), func() (run int) {
			for i := range nodes {
				for _, p := range policies {
					run += countRun(p.Decide(&nodes[i], t0))
				}
			}
			return run
		})
	})
	b.Run("daemonset-major", func(b *testing.B) {
		benchDecisions(b, len(nodes)*len(policies), func() (run int) {
			for _, p := range policies {
				for i := range nodes {
					run += countRun(p.Decide(&nodes[i], t0))
				}
			}
			return run
		})
	})
}

func countRun(d Decision) int {
	if d.ShouldRun {
		return 1
	}
	return 0
}

// benchDecisions runs pass, which makes decisions decisions and returns
// how many said run, and reports the time per decision and the share of
// yes answers.
func benchDecisions(b *testing.B, decisions int, pass func() int) {
	b.ReportAllocs()
	passes, run := 0, 0
	for b.Loop() {
		run = pass()
		passes++
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(passes*decisions), "ns/decision")
	b.ReportMetric(float64(run)/float64(decisions), "run-ratio")
}

// BenchmarkReasons measures rendering the reasons of a "no", which only
// people read.
func BenchmarkReasons(b *testing.B) {
	p := mustCompile(b, schema.PodSpec{
		NodeSelector: map[string]string{"role": "gateway"},
		Affinity:     terms(labelTerm(expr(schema.LabelArch, "In", "arm64")), labelTerm(expr("ram-gb", "Gt", "8"))),
	})
	n := withTaints(node("edge-1", "role", "camera", schema.LabelArch, "amd64", "ram-gb", "4"),
		taint("dedicated", "camera", schema.TaintNoSchedule))
	b.ReportAllocs()
	for b.Loop() {
		if len(p.Decide(&n, t0).Reasons()) != 3 {
			b.Fatal("want 3 reasons")
		}
	}
}
