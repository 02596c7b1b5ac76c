package placement

import (
	"slices"
	"testing"
	"time"

	"github.com/edgeset/edgeset/schema"
)

type decideCase struct {
	name    string
	spec    schema.PodSpec
	node    schema.Node
	run     bool
	keep    bool
	evictAt time.Time
	reason  Reason
	reasons []string // nil when run
}

// yes is the expected outcome of a case where the daemon runs.
func yes(name string, spec schema.PodSpec, n schema.Node) decideCase {
	return decideCase{name: name, spec: spec, node: n, run: true, keep: true}
}

// mismatch is the expected outcome of a selector or affinity "no".
func mismatch(name string, spec schema.PodSpec, n schema.Node, reason Reason, reasons ...string) decideCase {
	return decideCase{name: name, spec: spec, node: n, reason: reason, reasons: reasons}
}

func affinityOnly(ts ...schema.NodeSelectorTerm) schema.PodSpec {
	return schema.PodSpec{Affinity: terms(ts...)}
}

func labelCases() []decideCase {
	arm := affinityOnly(labelTerm(expr("arch", "In", "arm64", "arm")))
	notArm := affinityOnly(labelTerm(expr("arch", "NotIn", "arm")))
	gpu := affinityOnly(labelTerm(expr("gpu", "Exists")))
	noMaint := affinityOnly(labelTerm(expr("maintenance", "DoesNotExist")))
	bigRAM := affinityOnly(labelTerm(expr("ram-gb", "Gt", "4")))
	smallRAM := affinityOnly(labelTerm(expr("ram-gb", "Lt", "4")))
	aboveMinus := affinityOnly(labelTerm(expr("temp", "Gt", "-1")))
	return []decideCase{
		yes("no constraints", schema.PodSpec{}, node("n1")),
		yes("In matches one value", arm, node("n1", "arch", "arm")),
		mismatch("In value differs", arm, node("n1", "arch", "amd64"), ReasonNodeAffinity,
			`node affinity: no term matched (term 0: "arch" In [arm64 arm]: label is "amd64")`),
		mismatch("In label missing", arm, node("n1"), ReasonNodeAffinity,
			`node affinity: no term matched (term 0: "arch" In [arm64 arm]: label is missing)`),
		yes("NotIn other value", notArm, node("n1", "arch", "amd64")),
		yes("NotIn label missing", notArm, node("n1")),
		mismatch("NotIn listed value", notArm, node("n1", "arch", "arm"), ReasonNodeAffinity,
			`node affinity: no term matched (term 0: "arch" NotIn [arm]: label is "arm")`),
		yes("Exists with empty value", gpu, node("n1", "gpu", "")),
		mismatch("Exists label missing", gpu, node("n1"), ReasonNodeAffinity,
			`node affinity: no term matched (term 0: "gpu" Exists: label is missing)`),
		yes("DoesNotExist label missing", noMaint, node("n1")),
		mismatch("DoesNotExist label present", noMaint, node("n1", "maintenance", "true"), ReasonNodeAffinity,
			`node affinity: no term matched (term 0: "maintenance" DoesNotExist: label is "true")`),
		yes("Gt greater", bigRAM, node("n1", "ram-gb", "8")),
		yes("Gt with plus sign", bigRAM, node("n1", "ram-gb", "+8")),
		yes("Gt negative bound", aboveMinus, node("n1", "temp", "0")),
		mismatch("Gt equal", bigRAM, node("n1", "ram-gb", "4"), ReasonNodeAffinity,
			`node affinity: no term matched (term 0: "ram-gb" Gt 4: label is "4")`),
		mismatch("Gt not an integer", bigRAM, node("n1", "ram-gb", "8Gi"), ReasonNodeAffinity,
			`node affinity: no term matched (term 0: "ram-gb" Gt 4: label is "8Gi", not an integer)`),
		mismatch("Gt with space", bigRAM, node("n1", "ram-gb", " 8"), ReasonNodeAffinity,
			`node affinity: no term matched (term 0: "ram-gb" Gt 4: label is " 8", not an integer)`),
		mismatch("Gt beyond int64", bigRAM, node("n1", "ram-gb", "9223372036854775808"), ReasonNodeAffinity,
			`node affinity: no term matched (term 0: "ram-gb" Gt 4: label is "9223372036854775808", not an integer)`),
		mismatch("Gt label missing", bigRAM, node("n1"), ReasonNodeAffinity,
			`node affinity: no term matched (term 0: "ram-gb" Gt 4: label is missing)`),
		yes("Lt smaller", smallRAM, node("n1", "ram-gb", "2")),
		mismatch("Lt equal", smallRAM, node("n1", "ram-gb", "4"), ReasonNodeAffinity,
			`node affinity: no term matched (term 0: "ram-gb" Lt 4: label is "4")`),
		mismatch("Lt decimal", smallRAM, node("n1", "ram-gb", "3.5"), ReasonNodeAffinity,
			`node affinity: no term matched (term 0: "ram-gb" Lt 4: label is "3.5", not an integer)`),
		mismatch("Lt label missing", smallRAM, node("n1"), ReasonNodeAffinity,
			`node affinity: no term matched (term 0: "ram-gb" Lt 4: label is missing)`),
	}
}

func manyValues(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = "site-" + string(rune('a'+i))
	}
	return out
}

func termCases() []decideCase {
	onlyN1 := affinityOnly(fieldTerm(expr(FieldNodeName, "In", "n1")))
	notN1 := affinityOnly(fieldTerm(expr(FieldNodeName, "NotIn", "n1")))
	both := affinityOnly(schema.NodeSelectorTerm{
		MatchExpressions: []schema.NodeSelectorRequirement{expr("arch", "In", "arm64")},
		MatchFields:      []schema.NodeSelectorRequirement{expr(FieldNodeName, "In", "n1")},
	})
	and := affinityOnly(labelTerm(expr("arch", "In", "arm64"), expr("ram-gb", "Gt", "2")))
	or := affinityOnly(labelTerm(expr("arch", "In", "arm64")), labelTerm(expr("gpu", "Exists")))
	emptyOr := affinityOnly(schema.NodeSelectorTerm{}, labelTerm(expr("gpu", "Exists")))
	sites := affinityOnly(labelTerm(expr("site", "In", manyValues(12)...)))
	return []decideCase{
		yes("matchFields In own name", onlyN1, node("n1")),
		mismatch("matchFields In other name", onlyN1, node("n2"), ReasonNodeAffinity,
			`node affinity: no term matched (term 0: metadata.name In [n1]: node name is "n2")`),
		yes("matchFields NotIn other name", notN1, node("n2")),
		mismatch("matchFields NotIn own name", notN1, node("n1"), ReasonNodeAffinity,
			`node affinity: no term matched (term 0: metadata.name NotIn [n1]: node name is "n1")`),
		yes("expressions and fields both match", both, node("n1", "arch", "arm64")),
		mismatch("expressions match, field does not", both, node("n2", "arch", "arm64"), ReasonNodeAffinity,
			`node affinity: no term matched (term 0: metadata.name In [n1]: node name is "n2")`),
		mismatch("field matches, expression does not", both, node("n1", "arch", "amd64"), ReasonNodeAffinity,
			`node affinity: no term matched (term 0: "arch" In [arm64]: label is "amd64")`),
		yes("expressions ANDed, all match", and, node("n1", "arch", "arm64", "ram-gb", "4")),
		mismatch("expressions ANDed, second fails", and, node("n1", "arch", "arm64", "ram-gb", "2"), ReasonNodeAffinity,
			`node affinity: no term matched (term 0: "ram-gb" Gt 2: label is "2")`),
		yes("terms ORed, first matches", or, node("n1", "arch", "arm64")),
		yes("terms ORed, second matches", or, node("n1", "arch", "amd64", "gpu", "true")),
		mismatch("terms ORed, none matches", or, node("n1", "arch", "amd64"), ReasonNodeAffinity,
			`node affinity: no term matched (term 0: "arch" In [arm64]: label is "amd64"; term 1: "gpu" Exists: label is missing)`),
		yes("empty term ORed with a matching term", emptyOr, node("n1", "gpu", "1")),
		mismatch("empty term matches nothing", emptyOr, node("n1"), ReasonNodeAffinity,
			`node affinity: no term matched (term 0: an empty term matches no node; term 1: "gpu" Exists: label is missing)`),
		yes("In with many values", sites, node("n1", "site", "site-l")),
		mismatch("In with many values, none matches", sites, node("n1", "site", "site-z"), ReasonNodeAffinity,
			`node affinity: no term matched (term 0: "site" In [site-a site-b site-c site-d site-e site-f site-g site-h site-i site-j site-k site-l]: label is "site-z")`),
	}
}

func selectorCases() []decideCase {
	siteA := schema.PodSpec{NodeSelector: map[string]string{"site": "a"}}
	two := schema.PodSpec{NodeSelector: map[string]string{"site": "a", "role": "gateway"}}
	andAffinity := schema.PodSpec{
		NodeSelector: map[string]string{"site": "a"},
		Affinity:     terms(labelTerm(expr("arch", "In", "arm64"))),
	}
	return []decideCase{
		yes("nodeSelector matches", siteA, node("n1", "site", "a", "arch", "amd64")),
		mismatch("nodeSelector value differs", siteA, node("n1", "site", "b"), ReasonNodeSelector,
			`node selector: label "site" is "b", want "a"`),
		mismatch("nodeSelector label missing", siteA, node("n1"), ReasonNodeSelector,
			`node selector: label "site" is missing, want "a"`),
		mismatch("nodeSelector reports every label, sorted", two, node("n1", "site", "b"), ReasonNodeSelector,
			`node selector: label "role" is missing, want "gateway"`,
			`node selector: label "site" is "b", want "a"`),
		yes("nodeSelector and affinity both match", andAffinity, node("n1", "site", "a", "arch", "arm64")),
		mismatch("nodeSelector matches, affinity does not", andAffinity, node("n1", "site", "a", "arch", "amd64"), ReasonNodeAffinity,
			`node affinity: no term matched (term 0: "arch" In [arm64]: label is "amd64")`),
		mismatch("affinity matches, nodeSelector does not", andAffinity, node("n1", "site", "b", "arch", "arm64"), ReasonNodeSelector,
			`node selector: label "site" is "b", want "a"`),
		mismatch("neither matches, and a taint too", andAffinity,
			withTaints(node("n1", "site", "b"), taint("dedicated", "x", schema.TaintNoExecute)), ReasonNodeSelector,
			`node selector: label "site" is "b", want "a"`,
			`node affinity: no term matched (term 0: "arch" In [arm64]: label is missing)`,
			`taint dedicated=x:NoExecute is not tolerated`),
	}
}

// blocked is the expected outcome of a taint "no"; keep says whether a
// running instance stays.
func blocked(name string, spec schema.PodSpec, n schema.Node, keep bool, reason Reason, reasons ...string) decideCase {
	return decideCase{name: name, spec: spec, node: n, keep: keep, reason: reason, reasons: reasons}
}

func tolerates(ts ...schema.Toleration) schema.PodSpec { return schema.PodSpec{Tolerations: ts} }

func taintCases() []decideCase {
	n := node("n1")
	camera := taint("dedicated", "camera", schema.TaintNoSchedule)
	cameraX := taint("dedicated", "camera", schema.TaintNoExecute)
	return []decideCase{
		blocked("NoSchedule not tolerated keeps running instance", schema.PodSpec{}, withTaints(n, camera), true,
			ReasonUntoleratedNoSchedule, `taint dedicated=camera:NoSchedule is not tolerated`),
		yes("Equal with same value", tolerates(tol("dedicated", "Equal", "camera", "NoSchedule")), withTaints(n, camera)),
		yes("empty operator means Equal", tolerates(tol("dedicated", "", "camera", "")), withTaints(n, camera)),
		blocked("Equal with other value", tolerates(tol("dedicated", "Equal", "gpu", "NoSchedule")), withTaints(n, camera), true,
			ReasonUntoleratedNoSchedule, `taint dedicated=camera:NoSchedule is not tolerated`),
		yes("Exists ignores the value", tolerates(tol("dedicated", "Exists", "", "NoSchedule")), withTaints(n, camera)),
		blocked("Exists on another key", tolerates(tol("site", "Exists", "", "")), withTaints(n, camera), true,
			ReasonUntoleratedNoSchedule, `taint dedicated=camera:NoSchedule is not tolerated`),
		yes("empty key with Exists tolerates every taint", tolerates(tol("", "Exists", "", "")),
			withTaints(n, camera, cameraX, taint("other", "", schema.TaintNoExecute))),
		blocked("empty key with Exists honours the effect", tolerates(tol("", "Exists", "", "NoSchedule")), withTaints(n, camera, cameraX), false,
			ReasonUntoleratedNoExecute, `taint dedicated=camera:NoExecute is not tolerated`),
		yes("empty effect matches every effect", tolerates(tol("dedicated", "Equal", "camera", "")), withTaints(n, camera, cameraX)),
		blocked("NoExecute toleration does not cover NoSchedule", tolerates(tol("dedicated", "Exists", "", "NoExecute")), withTaints(n, camera, cameraX), true,
			ReasonUntoleratedNoSchedule, `taint dedicated=camera:NoSchedule is not tolerated`),
		blocked("NoExecute not tolerated stops the instance", schema.PodSpec{}, withTaints(n, taint("quarantine", "", schema.TaintNoExecute)), false,
			ReasonUntoleratedNoExecute, `taint quarantine:NoExecute is not tolerated`),
		yes("PreferNoSchedule never blocks", schema.PodSpec{}, withTaints(n, taint("dedicated", "camera", schema.TaintPreferNoSchedule))),
		blocked("NoExecute outranks NoSchedule", schema.PodSpec{}, withTaints(n, camera, cameraX), false,
			ReasonUntoleratedNoExecute,
			`taint dedicated=camera:NoSchedule is not tolerated`,
			`taint dedicated=camera:NoExecute is not tolerated`),
	}
}

func tolerationSecondsCases() []decideCase {
	n := node("n1")
	for300 := tolerates(tolFor("flaky", "Exists", "NoExecute", 300))
	added100sAgo := taintAddedAt("flaky", schema.TaintNoExecute, t0.Add(-100*time.Second))
	return []decideCase{
		{name: "tolerated until TimeAdded plus seconds", spec: for300, node: withTaints(n, added100sAgo),
			run: true, keep: true, evictAt: t0.Add(200 * time.Second)},
		{name: "TimeAdded nil counts from now", spec: for300, node: withTaints(n, taint("flaky", "", schema.TaintNoExecute)),
			run: true, keep: true, evictAt: t0.Add(300 * time.Second)},
		blocked("expired exactly at the deadline", for300, withTaints(n, taintAddedAt("flaky", schema.TaintNoExecute, t0.Add(-300*time.Second))), false,
			ReasonTolerationExpired, `taint flaky:NoExecute was tolerated for 300s, until 2025-06-01T12:00:00Z`),
		blocked("expired long ago", for300, withTaints(n, taintAddedAt("flaky", schema.TaintNoExecute, t0.Add(-time.Hour))), false,
			ReasonTolerationExpired, `taint flaky:NoExecute was tolerated for 300s, until 2025-06-01T11:05:00Z`),
		blocked("zero seconds evicts at once", tolerates(tolFor("flaky", "Exists", "NoExecute", 0)), withTaints(n, taint("flaky", "", schema.TaintNoExecute)), false,
			ReasonTolerationExpired, `taint flaky:NoExecute was tolerated for 0s, until 2025-06-01T12:00:00Z`),
		{name: "earliest deadline wins",
			spec: tolerates(tolFor("flaky", "Exists", "NoExecute", 300), tolFor("slow", "Exists", "NoExecute", 60)),
			node: withTaints(n, added100sAgo, taint("slow", "", schema.TaintNoExecute)),
			run:  true, keep: true, evictAt: t0.Add(60 * time.Second)},
		{name: "first matching toleration decides, bounded first",
			spec: tolerates(tolFor("flaky", "Exists", "NoExecute", 300), tol("", "Exists", "", "")),
			node: withTaints(n, added100sAgo), run: true, keep: true, evictAt: t0.Add(200 * time.Second)},
		yes("first matching toleration decides, unbounded first",
			tolerates(tol("", "Exists", "", ""), tolFor("flaky", "Exists", "NoExecute", 300)), withTaints(n, added100sAgo)),
		{name: "pending eviction with a NoSchedule no keeps the deadline",
			spec: for300, node: withTaints(n, added100sAgo, taint("dedicated", "", schema.TaintNoSchedule)),
			keep: true, evictAt: t0.Add(200 * time.Second), reason: ReasonUntoleratedNoSchedule,
			reasons: []string{`taint dedicated:NoSchedule is not tolerated`}},
		blocked("expired outranks NoSchedule", for300,
			withTaints(n, taint("dedicated", "", schema.TaintNoSchedule), taintAddedAt("flaky", schema.TaintNoExecute, t0.Add(-time.Hour))), false,
			ReasonTolerationExpired,
			`taint dedicated:NoSchedule is not tolerated`,
			`taint flaky:NoExecute was tolerated for 300s, until 2025-06-01T11:05:00Z`),
	}
}

func daemonTolerationCases() []decideCase {
	n := node("n1")
	cordoned := node("n1")
	cordoned.Unschedulable = true
	netDown := withTaints(n, taint(schema.TaintNodeNetworkUnavailable, "", schema.TaintNoSchedule))
	long := t0.Add(-24 * time.Hour)
	return []decideCase{
		yes("cordoned node keeps and gets daemons", schema.PodSpec{}, cordoned),
		yes("unschedulable taint tolerated", schema.PodSpec{}, withTaints(n, taint(schema.TaintNodeUnschedulable, "", schema.TaintNoSchedule))),
		yes("disk pressure", schema.PodSpec{}, withTaints(n, taint(schema.TaintNodeDiskPressure, "", schema.TaintNoSchedule))),
		yes("memory pressure", schema.PodSpec{}, withTaints(n, taint(schema.TaintNodeMemoryPressure, "", schema.TaintNoSchedule))),
		yes("pid pressure", schema.PodSpec{}, withTaints(n, taint(schema.TaintNodePIDPressure, "", schema.TaintNoSchedule))),
		yes("not-ready NoExecute for a day", schema.PodSpec{}, withTaints(n, taintAddedAt(schema.TaintNodeNotReady, schema.TaintNoExecute, long))),
		yes("unreachable NoExecute for a day", schema.PodSpec{}, withTaints(n, taintAddedAt(schema.TaintNodeUnreachable, schema.TaintNoExecute, long))),
		yes("own unreachable toleration with seconds is made unbounded",
			tolerates(tolFor(schema.TaintNodeUnreachable, "Exists", "NoExecute", 300)),
			withTaints(n, taintAddedAt(schema.TaintNodeUnreachable, schema.TaintNoExecute, long))),
		blocked("not-ready NoSchedule keeps new daemons off, as in Kubernetes", schema.PodSpec{},
			withTaints(n, taint(schema.TaintNodeNotReady, "", schema.TaintNoSchedule)), true,
			ReasonUntoleratedNoSchedule, `taint node.kubernetes.io/not-ready:NoSchedule is not tolerated`),
		blocked("network-unavailable without hostNetwork", schema.PodSpec{}, netDown, true,
			ReasonUntoleratedNoSchedule, `taint node.kubernetes.io/network-unavailable:NoSchedule is not tolerated`),
		yes("network-unavailable with hostNetwork", schema.PodSpec{HostNetwork: true}, netDown),
	}
}

func TestDecide(t *testing.T) {
	groups := map[string][]decideCase{
		"labels":            labelCases(),
		"terms":             termCases(),
		"nodeSelector":      selectorCases(),
		"taints":            taintCases(),
		"tolerationSeconds": tolerationSecondsCases(),
		"daemonTolerations": daemonTolerationCases(),
	}
	for group, cases := range groups {
		for _, tc := range cases {
			t.Run(group+"/"+tc.name, func(t *testing.T) { checkDecide(t, tc) })
		}
	}
}

func checkDecide(t *testing.T, tc decideCase) {
	p := mustCompile(t, tc.spec)
	d := p.Decide(&tc.node, t0)
	if d.ShouldRun != tc.run || d.ShouldContinueRunning != tc.keep {
		t.Errorf("run, keep = %v, %v; want %v, %v", d.ShouldRun, d.ShouldContinueRunning, tc.run, tc.keep)
	}
	if !d.EvictAt.Equal(tc.evictAt) {
		t.Errorf("EvictAt = %v, want %v", d.EvictAt, tc.evictAt)
	}
	if d.Reason != tc.reason {
		t.Errorf("Reason = %v, want %v", d.Reason, tc.reason)
	}
	if got := d.Reasons(); !slices.Equal(got, tc.reasons) {
		t.Errorf("Reasons:\n got %q\nwant %q", got, tc.reasons)
	}
}

func TestDecideDoesNotAllocate(t *testing.T) {
	p := mustCompile(t, schema.PodSpec{
		NodeSelector: map[string]string{"site": "a"},
		Affinity: terms(
			labelTerm(expr("arch", "In", "arm64"), expr("ram-gb", "Gt", "2")),
			labelTerm(expr("gpu", "Exists"), expr("maintenance", "DoesNotExist")),
		),
		Tolerations: []schema.Toleration{tolFor("flaky", "Exists", "NoExecute", 300)},
	})
	match := withTaints(node("n1", "site", "a", "arch", "arm64", "ram-gb", "4"),
		taint("flaky", "", schema.TaintNoExecute), taint(schema.TaintNodeDiskPressure, "", schema.TaintNoSchedule))
	notInteger := node("n2", "site", "a", "arch", "arm64", "ram-gb", "lots")
	tainted := withTaints(node("n3", "site", "a", "gpu", ""), taint("quarantine", "", schema.TaintNoExecute))
	for _, n := range []*schema.Node{&match, &notInteger, &tainted} {
		allocs := testing.AllocsPerRun(100, func() { sink = p.Decide(n, t0) })
		if allocs != 0 {
			t.Errorf("Decide(%s) allocates %v times per call, want 0", n.Name, allocs)
		}
	}
}

var sink Decision

func TestReasonString(t *testing.T) {
	for r, want := range map[Reason]string{
		ReasonNone:                  "None",
		ReasonNodeSelector:          "NodeSelectorMismatch",
		ReasonNodeAffinity:          "NodeAffinityMismatch",
		ReasonUntoleratedNoSchedule: "UntoleratedNoScheduleTaint",
		ReasonUntoleratedNoExecute:  "UntoleratedNoExecuteTaint",
		ReasonTolerationExpired:     "TolerationExpired",
		Reason(200):                 "Unknown",
	} {
		if got := r.String(); got != want {
			t.Errorf("Reason(%d).String() = %q, want %q", r, got, want)
		}
	}
}

func TestZeroDecisionHasNoReasons(t *testing.T) {
	var d Decision
	if got := d.Reasons(); got != nil {
		t.Errorf("Reasons of the zero Decision = %q, want nil", got)
	}
}
