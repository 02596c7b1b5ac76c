package placement

import (
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/edgeset/edgeset/schema"
)

const termsPath = "spec.template.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms"

func TestCompileRejects(t *testing.T) {
	cases := []struct {
		name string
		spec schema.PodSpec
		want []string // every FieldError, as Error() renders it
	}{
		{"Gt value not an integer", affinityOnly(labelTerm(expr("a", "In", "x"), expr("ram", "Gt", "4Gi"))),
			[]string{termsPath + `[0].matchExpressions[1].values[0]: "4Gi" is not an integer (Gt compares the label as a base-10 int64)`}},
		{"Lt with two values", affinityOnly(labelTerm(expr("ram", "Lt", "1", "2"))),
			[]string{termsPath + `[0].matchExpressions[0].values: Lt needs exactly one integer value, got 2 values`}},
		{"Gt without value", affinityOnly(labelTerm(), labelTerm(expr("ram", "Gt"))),
			[]string{termsPath + `[1].matchExpressions[0].values: Gt needs exactly one integer value, got 0 values`}},
		{"unknown operator", affinityOnly(labelTerm(expr("a", "Equals", "x"))),
			[]string{termsPath + `[0].matchExpressions[0].operator: "Equals" is not a valid operator (want In, NotIn, Exists, DoesNotExist, Gt or Lt)`}},
		{"In without values", affinityOnly(labelTerm(expr("a", "In"))),
			[]string{termsPath + `[0].matchExpressions[0].values: In needs at least one value`}},
		{"Exists with values", affinityOnly(labelTerm(expr("a", "Exists", "x"))),
			[]string{termsPath + `[0].matchExpressions[0].values: Exists takes no values, got 1`}},
		{"empty key", affinityOnly(labelTerm(expr("", "Exists"))),
			[]string{termsPath + `[0].matchExpressions[0].key: must not be empty`}},
		{"no terms", affinityOnly(), []string{termsPath + `: must have at least one term`}},
		{"matchFields on another field", affinityOnly(fieldTerm(expr("spec.nodeName", "In", "n1"))),
			[]string{termsPath + `[0].matchFields[0].key: "spec.nodeName" is not a supported field (want metadata.name)`}},
		{"matchFields with Exists", affinityOnly(fieldTerm(expr(FieldNodeName, "Exists"))),
			[]string{termsPath + `[0].matchFields[0].operator: "Exists" is not valid for matchFields (want In or NotIn)`}},
		{"matchFields with two names", affinityOnly(fieldTerm(expr(FieldNodeName, "In", "n1", "n2"))),
			[]string{termsPath + `[0].matchFields[0].values: In on metadata.name needs exactly one value, got 2`}},
		{"toleration operator", tolerates(tol("a", "Gt", "1", "")),
			[]string{`spec.template.spec.tolerations[0].operator: "Gt" is not a valid operator (want Equal or Exists)`}},
		{"toleration effect", tolerates(tol("a", "Exists", "", "NoRun")),
			[]string{`spec.template.spec.tolerations[0].effect: "NoRun" is not a valid effect (want NoSchedule, PreferNoSchedule, NoExecute or empty for all)`}},
		{"toleration empty key with Equal", tolerates(tol("a", "Exists", "", ""), tol("", "Equal", "", "")),
			[]string{`spec.template.spec.tolerations[1].operator: must be Exists when key is empty (an empty key with Exists tolerates every taint)`}},
		{"toleration Exists with value", tolerates(tol("a", "Exists", "x", "")),
			[]string{`spec.template.spec.tolerations[0].value: must be empty when operator is Exists, got "x"`}},
		{"tolerationSeconds without NoExecute", tolerates(tolFor("a", "Exists", "NoSchedule", 5)),
			[]string{`spec.template.spec.tolerations[0].tolerationSeconds: needs effect NoExecute, got "NoSchedule"`}},
		{"every error is listed",
			schema.PodSpec{
				Affinity:    terms(labelTerm(expr("ram", "Gt", "x")), fieldTerm(expr("uid", "In", "1"))),
				Tolerations: []schema.Toleration{tol("a", "Maybe", "", "")},
			},
			[]string{
				termsPath + `[0].matchExpressions[0].values[0]: "x" is not an integer (Gt compares the label as a base-10 int64)`,
				termsPath + `[1].matchFields[0].key: "uid" is not a supported field (want metadata.name)`,
				`spec.template.spec.tolerations[0].operator: "Maybe" is not a valid operator (want Equal or Exists)`,
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Compile(daemonSet(tc.spec))
			if err == nil {
				t.Fatalf("Compile succeeded with %+v, want an error", p)
			}
			if !strings.HasPrefix(err.Error(), "compile placement of daemonset edge/agent: ") {
				t.Errorf("error %q does not name the daemonset", err)
			}
			if got := fieldErrors(err); !slices.Equal(got, tc.want) {
				t.Errorf("field errors:\n got %q\nwant %q", got, tc.want)
			}
		})
	}
}

// fieldErrors renders every *FieldError that err, as Compile returns it,
// joins.
func fieldErrors(err error) []string {
	joined, ok := errors.Unwrap(err).(interface{ Unwrap() []error })
	if !ok {
		return nil
	}
	var out []string
	for _, e := range joined.Unwrap() {
		var fe *FieldError
		if errors.As(e, &fe) {
			out = append(out, fe.Error())
		}
	}
	return out
}

func TestCompileNil(t *testing.T) {
	if _, err := Compile(nil); !errors.Is(err, ErrNilDaemonSet) {
		t.Errorf("Compile(nil) error = %v, want ErrNilDaemonSet", err)
	}
}

func TestCompileAcceptsKubernetesShapes(t *testing.T) {
	p := mustCompile(t, schema.PodSpec{
		NodeSelector: map[string]string{"kubernetes.io/os": "linux"},
		Affinity: terms(
			labelTerm(expr("a", "In", "x"), expr("b", "NotIn", "y"), expr("c", "Exists"), expr("d", "DoesNotExist"),
				expr("e", "Gt", "-9223372036854775808"), expr("f", "Lt", "+9223372036854775807")),
			fieldTerm(expr(FieldNodeName, "NotIn", "n1")),
			schema.NodeSelectorTerm{},
		),
		Tolerations: []schema.Toleration{
			tol("", "Exists", "", ""), tol("a", "", "", ""), tol("b", "Equal", "v", "PreferNoSchedule"),
			tolFor("c", "Exists", "NoExecute", -5),
		},
	})
	if got := p.DaemonSet(); got != "edge/agent" {
		t.Errorf("DaemonSet() = %q, want edge/agent", got)
	}
}

func TestTolerationsMergeAsKubernetes(t *testing.T) {
	always := slices.Clone(daemonTolerationsAlways)
	notReady, unreachable := always[0], always[1]
	cases := []struct {
		name        string
		own         []schema.Toleration
		hostNetwork bool
		want        []schema.Toleration
	}{
		{"none", nil, false, always},
		{"hostNetwork adds network-unavailable", nil, true, append(slices.Clone(always), daemonTolerationHostNetwork)},
		{"own kept first, same match replaced in place",
			[]schema.Toleration{tol("dedicated", "Equal", "camera", "NoSchedule"), tolFor(schema.TaintNodeUnreachable, "Exists", "NoExecute", 300)},
			false,
			append([]schema.Toleration{tol("dedicated", "Equal", "camera", "NoSchedule"), unreachable, notReady}, always[2:]...)},
		{"an exact copy already there leaves a bounded twin alone",
			[]schema.Toleration{tolFor(schema.TaintNodeNotReady, "Exists", "NoExecute", 300), notReady},
			false,
			append([]schema.Toleration{tolFor(schema.TaintNodeNotReady, "Exists", "NoExecute", 300), notReady}, always[1:]...)},
		{"a different operator is not the same match",
			[]schema.Toleration{tol(schema.TaintNodeDiskPressure, "", "", "NoSchedule")},
			false,
			append([]schema.Toleration{tol(schema.TaintNodeDiskPressure, "", "", "NoSchedule")}, always...)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			spec := schema.PodSpec{Tolerations: tc.own, HostNetwork: tc.hostNetwork}
			before := slices.Clone(tc.own)
			got := mustCompile(t, spec).Tolerations()
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Tolerations:\n got %+v\nwant %+v", got, tc.want)
			}
			if !reflect.DeepEqual(tc.own, before) {
				t.Errorf("Compile modified the daemonset's tolerations: %+v", tc.own)
			}
		})
	}
}

func TestPolicyDoesNotShareTheDaemonSet(t *testing.T) {
	spec := schema.PodSpec{
		NodeSelector: map[string]string{"site": "a"},
		Affinity:     terms(labelTerm(expr("arch", "In", "arm64"))),
		Tolerations:  []schema.Toleration{tolFor("flaky", "Exists", "NoExecute", 300)},
	}
	p := mustCompile(t, spec)
	spec.NodeSelector["site"] = "b"
	spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms[0].MatchExpressions[0].Values[0] = "amd64"
	*spec.Tolerations[0].TolerationSeconds = 1
	got := p.Tolerations()
	*got[0].TolerationSeconds = 2

	n := withTaints(node("n1", "site", "a", "arch", "arm64"), taint("flaky", "", schema.TaintNoExecute))
	d := p.Decide(&n, t0)
	if !d.ShouldRun || !d.EvictAt.Equal(t0.Add(300*1e9)) {
		t.Errorf("after changing the daemonset: run %v, EvictAt %v; want true, %v", d.ShouldRun, d.EvictAt, t0.Add(300*1e9))
	}
	if s := p.Tolerations()[0].TolerationSeconds; s == nil || *s != 300 {
		t.Errorf("Tolerations()[0].TolerationSeconds = %v, want 300", s)
	}
}

func TestParseIntAgreesWithStrconv(t *testing.T) {
	for _, s := range []string{
		"", "+", "-", "0", "-0", "+0", "007", "42", "-42", "1_000", "0x10", " 1", "1 ", "1.0", "1e3",
		"9223372036854775807", "9223372036854775808", "-9223372036854775808", "-9223372036854775809",
		"99999999999999999999", "18446744073709551616", "+-1", "--1", "٣",
	} {
		checkParseInt(t, s)
	}
}
