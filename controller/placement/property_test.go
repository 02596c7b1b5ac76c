package placement

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/edgeset/edgeset/schema"
)

// propertyCases is how many random cases each property test checks.
const propertyCases = 5000

// gen draws random, valid daemonsets and nodes from small pools, so that
// matches, mismatches and every taint outcome all occur often.
type gen struct {
	r   *rand.Rand
	now time.Time
}

func newGen(seed uint64) *gen {
	return &gen{r: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), now: t0}
}

var (
	genLabelKeys   = []string{"site", "role", "arch", "ram-gb", "gpu"}
	genLabelValues = []string{"a", "b", "c", "1", "4", "16", "-3", "+7", "x1", ""}
	genBounds      = []string{"-5", "0", "3", "4", "10"}
	genNodeNames   = []string{"n1", "n2", "n3"}
	genTaintKeys   = []string{"dedicated", "site", "dedicated", "site", schema.TaintNodeNotReady, schema.TaintNodeUnreachable,
		schema.TaintNodeDiskPressure, schema.TaintNodeNetworkUnavailable, schema.TaintNodeUnschedulable}
	genTaintValues       = []string{"", "a", "b"}
	genEffects           = []string{schema.TaintNoSchedule, schema.TaintPreferNoSchedule, schema.TaintNoExecute}
	genSeconds           = []int64{-1, 0, 60, 300, 600, 3600, 3600}
	genTolerationEffects = []string{"", schema.TaintNoSchedule, schema.TaintPreferNoSchedule, schema.TaintNoExecute, schema.TaintNoExecute}
	genOperators         = []string{"In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"}
)

func pick[T any](g *gen, from []T) T { return from[g.r.IntN(len(from))] }

func (g *gen) chance(percent int) bool { return g.r.IntN(100) < percent }

func (g *gen) node() schema.Node {
	n := schema.Node{Name: pick(g, genNodeNames), Labels: map[string]string{}, Unschedulable: g.chance(20)}
	for _, k := range genLabelKeys {
		if g.chance(60) {
			n.Labels[k] = pick(g, genLabelValues)
		}
	}
	for range g.r.IntN(3) {
		n.Taints = append(n.Taints, g.taint())
	}
	return n
}

func (g *gen) taint() schema.Taint {
	t := schema.Taint{Key: pick(g, genTaintKeys), Value: pick(g, genTaintValues), Effect: pick(g, genEffects)}
	if g.chance(70) {
		at := g.now.Add(-time.Duration(g.r.IntN(700)) * time.Second)
		t.TimeAdded = &at
	}
	return t
}

func (g *gen) daemonSet() *schema.DaemonSet {
	spec := schema.PodSpec{HostNetwork: g.chance(30)}
	if g.chance(20) {
		spec.NodeSelector = map[string]string{}
		for range 1 + g.r.IntN(2) {
			spec.NodeSelector[pick(g, genLabelKeys)] = pick(g, genLabelValues)
		}
	}
	if g.chance(40) {
		var ts []schema.NodeSelectorTerm
		for range 1 + g.r.IntN(3) {
			ts = append(ts, g.term(genOperators))
		}
		spec.Affinity = terms(ts...)
	}
	for range g.r.IntN(6) {
		spec.Tolerations = append(spec.Tolerations, g.toleration())
	}
	return daemonSet(spec)
}

func (g *gen) term(ops []string) schema.NodeSelectorTerm {
	var t schema.NodeSelectorTerm
	for range g.r.IntN(4) {
		t.MatchExpressions = append(t.MatchExpressions, g.requirement(pick(g, ops)))
	}
	if g.chance(15) {
		op := pick(g, []string{"In", "NotIn"})
		t.MatchFields = append(t.MatchFields, expr(FieldNodeName, op, pick(g, genNodeNames)))
	}
	return t
}

func (g *gen) requirement(op string) schema.NodeSelectorRequirement {
	r := expr(pick(g, genLabelKeys), op)
	switch op {
	case "In", "NotIn":
		for range 1 + g.r.IntN(3) {
			r.Values = append(r.Values, pick(g, genLabelValues))
		}
	case "Gt", "Lt":
		r.Values = []string{pick(g, genBounds)}
	}
	return r
}

func (g *gen) toleration() schema.Toleration {
	t := schema.Toleration{Effect: pick(g, genTolerationEffects)}
	switch g.r.IntN(4) {
	case 3: // the shape that delays an eviction
		s := pick(g, genSeconds)
		return schema.Toleration{Key: pick(g, genTaintKeys[:2]), Operator: schema.TolerationOpExists, Effect: schema.TaintNoExecute, TolerationSeconds: &s}
	case 0:
		t.Operator = schema.TolerationOpExists
		if g.chance(80) {
			t.Key = pick(g, genTaintKeys)
		}
	case 1:
		t.Operator, t.Key, t.Value = schema.TolerationOpEqual, pick(g, genTaintKeys), pick(g, genTaintValues)
	default:
		t.Key, t.Value = pick(g, genTaintKeys), pick(g, genTaintValues)
	}
	if t.Effect == schema.TaintNoExecute && g.chance(70) {
		s := pick(g, genSeconds)
		t.TolerationSeconds = &s
	}
	return t
}

// forRandomCases calls check with cases random compiled daemonsets
// and nodes; describe identifies a failing case.
func forRandomCases(t *testing.T, seed uint64, cases int, check func(g *gen, ds *schema.DaemonSet, p *Policy, n schema.Node) error) {
	g := newGen(seed)
	for i := range cases {
		ds, n := g.daemonSet(), g.node()
		p, err := Compile(ds)
		if err != nil {
			t.Fatalf("case %d: generated daemonset does not compile: %v", i, err)
		}
		if err := check(g, ds, p, n); err != nil {
			t.Fatalf("case %d (seed %d): %v\ndaemonset spec: %+v\nnode: %+v", i, seed, err, describeSpec(ds), n)
		}
	}
}

func describeSpec(ds *schema.DaemonSet) string {
	s := ds.Spec.Template.Spec
	out := fmt.Sprintf("nodeSelector=%v hostNetwork=%v tolerations=[", s.NodeSelector, s.HostNetwork)
	for _, t := range s.Tolerations {
		secs := "nil"
		if t.TolerationSeconds != nil {
			secs = strconv.FormatInt(*t.TolerationSeconds, 10)
		}
		out += fmt.Sprintf("{%q %s %q %s %s}", t.Key, t.Operator, t.Value, t.Effect, secs)
	}
	out += "]"
	if s.Affinity != nil {
		out += fmt.Sprintf(" affinity=%+v", s.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms)
	}
	return out
}

func TestDecideAgreesWithReference(t *testing.T) {
	counts := map[string]int{}
	const cases = 4 * propertyCases
	forRandomCases(t, 1, cases, func(g *gen, ds *schema.DaemonSet, p *Policy, n schema.Node) error {
		d := p.Decide(&n, g.now)
		run, keep, evictAt := refDecide(ds, n, g.now)
		counts[fmt.Sprintf("run=%v keep=%v evict=%v", run, keep, !evictAt.IsZero())]++
		if d.ShouldRun != run || d.ShouldContinueRunning != keep || !d.EvictAt.Equal(evictAt) {
			return fmt.Errorf("Decide: run %v keep %v evictAt %v; reference: run %v keep %v evictAt %v",
				d.ShouldRun, d.ShouldContinueRunning, d.EvictAt, run, keep, evictAt)
		}
		return nil
	})
	// The generator must exercise every outcome, or agreement proves little.
	for _, outcome := range []string{"run=true keep=true evict=false", "run=true keep=true evict=true",
		"run=false keep=true evict=false", "run=false keep=true evict=true", "run=false keep=false evict=false"} {
		if counts[outcome] < cases/500 {
			t.Errorf("outcome %q drawn %d times in %d cases; the generator is too narrow: %v", outcome, counts[outcome], cases, counts)
		}
	}
}

func TestDecisionIsConsistent(t *testing.T) {
	forRandomCases(t, 2, propertyCases, func(g *gen, _ *schema.DaemonSet, p *Policy, n schema.Node) error {
		d := p.Decide(&n, g.now)
		reasons := d.Reasons()
		switch {
		case d.ShouldRun && !d.ShouldContinueRunning:
			return fmt.Errorf("ShouldRun without ShouldContinueRunning")
		case d.ShouldRun && (reasons != nil || d.Reason != ReasonNone):
			return fmt.Errorf("ShouldRun with reason %v, reasons %q", d.Reason, reasons)
		case !d.ShouldRun && (len(reasons) == 0 || d.Reason == ReasonNone):
			return fmt.Errorf("no with reason %v, reasons %q", d.Reason, reasons)
		case !d.EvictAt.IsZero() && (!d.ShouldContinueRunning || !d.EvictAt.After(g.now)):
			return fmt.Errorf("EvictAt %v with keep %v at %v", d.EvictAt, d.ShouldContinueRunning, g.now)
		case !d.ShouldContinueRunning && d.Reason == ReasonUntoleratedNoSchedule:
			return fmt.Errorf("stopped for a NoSchedule reason")
		}
		return nil
	})
}

// TestRecallGivesTheDecisionBack: a Decision recalled from its verdict and
// eviction instant is the Decision Decide returned, Reasons included.
func TestRecallGivesTheDecisionBack(t *testing.T) {
	reasons := map[Reason]int{}
	forRandomCases(t, 5, propertyCases, func(g *gen, _ *schema.DaemonSet, p *Policy, n schema.Node) error {
		d := p.Decide(&n, g.now)
		reasons[d.Reason]++
		back := p.Recall(d.Verdict(), d.EvictAt, &n, g.now)
		if back != d {
			return fmt.Errorf("Recall(%08b, %v) = %+v, Decide gave %+v", d.Verdict(), d.EvictAt, back, d)
		}
		if got, want := back.Reasons(), d.Reasons(); !slices.Equal(got, want) {
			return fmt.Errorf("recalled Reasons %q, Decide's %q", got, want)
		}
		return nil
	})
	for r := range Reason(len(reasonNames)) {
		if reasons[r] == 0 {
			t.Errorf("reason %v never drawn in %d cases: %v", r, propertyCases, reasons)
		}
	}
}

func TestEmptyKeyExistsToleratesEveryTaint(t *testing.T) {
	g := newGen(3)
	p := mustCompile(t, tolerates(tol("", "Exists", "", "")))
	for range propertyCases {
		n := g.node()
		n.Taints = append(n.Taints, g.taint())
		d := p.Decide(&n, g.now)
		if !d.ShouldRun || !d.ShouldContinueRunning || !d.EvictAt.IsZero() {
			t.Fatalf("node %+v: run %v keep %v evictAt %v; want run, keep, no eviction", n, d.ShouldRun, d.ShouldContinueRunning, d.EvictAt)
		}
	}
}

func TestAddingALabelKeepsInOnlyMatches(t *testing.T) {
	g := newGen(4)
	matched := 0
	for i := range propertyCases {
		spec := schema.PodSpec{Affinity: terms(g.term([]string{"In"}), g.term([]string{"In"}))}
		if g.chance(50) {
			spec.NodeSelector = map[string]string{pick(g, genLabelKeys): pick(g, genLabelValues)}
		}
		p := mustCompile(t, spec)
		n := g.node()
		n.Taints = nil
		before := p.Decide(&n, g.now)
		if !before.ShouldRun {
			continue
		}
		matched++
		key := pick(g, append([]string{"extra"}, genLabelKeys...))
		if _, ok := n.Labels[key]; ok {
			continue
		}
		n.Labels[key] = pick(g, genLabelValues)
		if after := p.Decide(&n, g.now); !after.ShouldRun {
			t.Fatalf("case %d: adding label %s=%s unmatched %s: %q", i, key, n.Labels[key], describeSpec(daemonSet(spec)), after.Reasons())
		}
	}
	if matched < propertyCases/50 {
		t.Errorf("only %d of %d cases matched before adding a label", matched, propertyCases)
	}
}

func TestRemovingANoScheduleTaintNeverBlocks(t *testing.T) {
	forRandomCases(t, 5, propertyCases, func(g *gen, _ *schema.DaemonSet, p *Policy, n schema.Node) error {
		n.Taints = append(n.Taints, taint(pick(g, genTaintKeys), pick(g, genTaintValues), schema.TaintNoSchedule))
		before := p.Decide(&n, g.now)
		for i := range n.Taints {
			if n.Taints[i].Effect != schema.TaintNoSchedule {
				continue
			}
			m := n
			m.Taints = slices.Delete(slices.Clone(n.Taints), i, i+1)
			after := p.Decide(&m, g.now)
			if before.ShouldRun && !after.ShouldRun {
				return fmt.Errorf("removing taint %d turned ShouldRun false: %q", i, after.Reasons())
			}
			if after.ShouldContinueRunning != before.ShouldContinueRunning || !after.EvictAt.Equal(before.EvictAt) {
				return fmt.Errorf("removing NoSchedule taint %d changed keep %v->%v, EvictAt %v->%v", i,
					before.ShouldContinueRunning, after.ShouldContinueRunning, before.EvictAt, after.EvictAt)
			}
		}
		return nil
	})
}

func TestParseIntAgreesWithStrconvOnRandomStrings(t *testing.T) {
	r := rand.New(rand.NewPCG(6, 6))
	const alphabet = "+-0123456789_ x"
	for range propertyCases {
		b := make([]byte, r.IntN(22))
		for i := range b {
			b[i] = alphabet[r.IntN(len(alphabet))]
		}
		checkParseInt(t, string(b))
		checkParseInt(t, strconv.FormatInt(int64(r.Uint64()), 10))
	}
}

func checkParseInt(t *testing.T, s string) {
	t.Helper()
	want, err := strconv.ParseInt(s, 10, 64)
	got, ok := parseInt(s)
	if ok != (err == nil) || (ok && got != want) {
		t.Errorf("parseInt(%q) = %d, %v; strconv.ParseInt = %d, %v", s, got, ok, want, err)
	}
}

// refDecide is a straight-line transcription over the schema types of
// Kubernetes NodeShouldRunDaemonPod, AddOrUpdateDaemonPodTolerations and
// the taint eviction controller, with tolerationSeconds counted from the
// taint's TimeAdded (now when nil). It shares no code with the package.
func refDecide(ds *schema.DaemonSet, n schema.Node, now time.Time) (run, keep bool, evictAt time.Time) {
	spec := ds.Spec.Template.Spec
	for k, v := range spec.NodeSelector {
		if got, ok := n.Labels[k]; !ok || got != v {
			return false, false, time.Time{}
		}
	}
	if !refAffinity(spec.Affinity, n) {
		return false, false, time.Time{}
	}
	tolerations := refDaemonTolerations(spec)
	taints := slices.Clone(n.Taints)
	if n.Unschedulable {
		taints = append(taints, schema.Taint{Key: schema.TaintNodeUnschedulable, Effect: schema.TaintNoSchedule})
	}
	run, keep = true, true
	for _, taint := range taints {
		if taint.Effect != schema.TaintNoSchedule && taint.Effect != schema.TaintNoExecute {
			continue
		}
		var used *schema.Toleration
		for i := range tolerations {
			if refTolerates(tolerations[i], taint) {
				used = &tolerations[i]
				break
			}
		}
		if used == nil {
			run = false
			if taint.Effect == schema.TaintNoExecute {
				keep = false
			}
			continue
		}
		if taint.Effect != schema.TaintNoExecute || used.TolerationSeconds == nil {
			continue
		}
		start := now
		if taint.TimeAdded != nil {
			start = *taint.TimeAdded
		}
		deadline := start.Add(time.Duration(max(*used.TolerationSeconds, 0)) * time.Second)
		if !deadline.After(now) {
			run, keep = false, false
		} else if evictAt.IsZero() || deadline.Before(evictAt) {
			evictAt = deadline
		}
	}
	if !keep {
		evictAt = time.Time{}
	}
	return run, keep, evictAt
}

func refAffinity(a *schema.Affinity, n schema.Node) bool {
	if a == nil || a.NodeAffinity == nil || a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return true
	}
	for _, term := range a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
		if len(term.MatchExpressions) == 0 && len(term.MatchFields) == 0 {
			continue
		}
		ok := true
		for _, r := range term.MatchExpressions {
			v, present := n.Labels[r.Key]
			ok = ok && refLabelMatches(r, v, present)
		}
		for _, r := range term.MatchFields {
			ok = ok && (r.Operator == "In") == slices.Contains(r.Values, n.Name)
		}
		if ok {
			return true
		}
	}
	return false
}

func refLabelMatches(r schema.NodeSelectorRequirement, v string, present bool) bool {
	switch r.Operator {
	case "In":
		return present && slices.Contains(r.Values, v)
	case "NotIn":
		return !present || !slices.Contains(r.Values, v)
	case "Exists":
		return present
	case "DoesNotExist":
		return !present
	}
	if !present {
		return false
	}
	have, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return false
	}
	bound, _ := strconv.ParseInt(r.Values[0], 10, 64)
	if r.Operator == "Gt" {
		return have > bound
	}
	return have < bound
}

func refTolerates(t schema.Toleration, taint schema.Taint) bool {
	if t.Effect != "" && t.Effect != taint.Effect {
		return false
	}
	if t.Key != "" && t.Key != taint.Key {
		return false
	}
	switch t.Operator {
	case "", "Equal":
		return t.Value == taint.Value
	case "Exists":
		return true
	}
	return false
}

// refDaemonTolerations is AddOrUpdateDaemonPodTolerations with
// AddOrUpdateTolerationInPodSpec written out as Kubernetes writes it.
func refDaemonTolerations(spec schema.PodSpec) []schema.Toleration {
	tolerations := slices.Clone(spec.Tolerations)
	add := func(key, effect string) {
		want := schema.Toleration{Key: key, Operator: "Exists", Effect: effect}
		var next []schema.Toleration
		updated := false
		for _, have := range tolerations {
			if have.Key == want.Key && have.Effect == want.Effect && have.Operator == want.Operator && have.Value == want.Value {
				if reflect.DeepEqual(have, want) {
					return
				}
				next = append(next, want)
				updated = true
				continue
			}
			next = append(next, have)
		}
		if !updated {
			next = append(next, want)
		}
		tolerations = next
	}
	add(schema.TaintNodeNotReady, schema.TaintNoExecute)
	add(schema.TaintNodeUnreachable, schema.TaintNoExecute)
	add(schema.TaintNodeDiskPressure, schema.TaintNoSchedule)
	add(schema.TaintNodeMemoryPressure, schema.TaintNoSchedule)
	add(schema.TaintNodePIDPressure, schema.TaintNoSchedule)
	add(schema.TaintNodeUnschedulable, schema.TaintNoSchedule)
	if spec.HostNetwork {
		add(schema.TaintNodeNetworkUnavailable, schema.TaintNoSchedule)
	}
	return tolerations
}
