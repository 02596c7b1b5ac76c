package placement

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/edgeset/edgeset/schema"
)

// Field paths named by compile errors.
const (
	pathPodSpec       = "spec.template.spec"
	pathTolerations   = pathPodSpec + ".tolerations"
	pathRequiredTerms = pathPodSpec + ".affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
)

// FieldNodeName is the only node field matchFields may name, as in
// Kubernetes.
const FieldNodeName = "metadata.name"

// ErrNilDaemonSet is returned by Compile and Explain when given no daemonset.
var ErrNilDaemonSet = errors.New("placement: nil daemonset")

// FieldError says why one field of a daemonset cannot be compiled into a
// Policy.
type FieldError struct {
	// Path names the field, e.g.
	// spec.template.spec.tolerations[2].operator.
	Path string
	// Detail says what is wrong with it.
	Detail string
}

// Error returns "path: detail".
func (e *FieldError) Error() string { return e.Path + ": " + e.Detail }

// Policy is the compiled placement rule of one daemonset revision: its
// nodeSelector, its required node affinity and its tolerations, including
// those the Kubernetes DaemonSet controller adds to every daemon pod.
// A Policy is immutable, safe for concurrent use, and keeps no reference to
// the DaemonSet it was compiled from.
type Policy struct {
	daemonSet    string
	nodeSelector []labelEquals // sorted by key
	affinity     []term        // ORed; meaningful only when hasAffinity
	hasAffinity  bool
	tolerations  []toleration        // effective, in the order Kubernetes uses
	effective    []schema.Toleration // the same, as written, for Tolerations
}

// Compile builds the Policy of ds. It fails, with an error that unwraps (via
// errors.Join) to one *FieldError per offending field, when the affinity or
// the tolerations are ones the Kubernetes API server would reject: an
// unknown operator or effect, In/NotIn without values, Exists/DoesNotExist
// with values, Gt/Lt without exactly one integer value, matchFields on
// anything but metadata.name with In/NotIn and one value, an empty
// nodeSelectorTerms list, a toleration with an empty key whose operator is
// not Exists, Exists with a value, or tolerationSeconds on an effect other
// than NoExecute.
func Compile(ds *schema.DaemonSet) (*Policy, error) {
	if ds == nil {
		return nil, ErrNilDaemonSet
	}
	spec := &ds.Spec.Template.Spec
	var c compiler
	p := &Policy{
		daemonSet:    ds.Key(),
		nodeSelector: compileNodeSelector(spec.NodeSelector),
	}
	p.affinity, p.hasAffinity = c.affinity(spec.Affinity)
	c.checkTolerations(spec.Tolerations)
	if err := errors.Join(c.errs...); err != nil {
		return nil, fmt.Errorf("compile placement of daemonset %s: %w", p.daemonSet, err)
	}
	p.effective = daemonTolerations(spec.Tolerations, spec.HostNetwork)
	p.tolerations = compileTolerations(p.effective)
	return p, nil
}

// DaemonSet returns the "namespace/name" of the daemonset the policy was
// compiled from.
func (p *Policy) DaemonSet() string { return p.daemonSet }

// Tolerations returns a copy of the tolerations the policy applies: the
// daemonset's own, merged with the ones every daemon gets, as the Kubernetes
// DaemonSet controller merges them.
func (p *Policy) Tolerations() []schema.Toleration {
	out := make([]schema.Toleration, len(p.effective))
	for i, t := range p.effective {
		out[i] = copyToleration(t)
	}
	return out
}

// compiler collects every compile error instead of stopping at the first.
type compiler struct {
	errs []error
}

func (c *compiler) fail(path, format string, args ...any) {
	c.errs = append(c.errs, &FieldError{Path: path, Detail: fmt.Sprintf(format, args...)})
}

// labelEquals is one nodeSelector entry: the label must be present and equal.
type labelEquals struct {
	key, value string
}

func compileNodeSelector(sel map[string]string) []labelEquals {
	out := make([]labelEquals, 0, len(sel))
	for k, v := range sel {
		out = append(out, labelEquals{key: k, value: v})
	}
	slices.SortFunc(out, func(a, b labelEquals) int { return strings.Compare(a.key, b.key) })
	return out
}

// affinity compiles the required node affinity. ok is false when there is
// none, which places no constraint.
func (c *compiler) affinity(a *schema.Affinity) (terms []term, ok bool) {
	if a == nil || a.NodeAffinity == nil || a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return nil, false
	}
	sel := a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution
	path := pathRequiredTerms + ".nodeSelectorTerms"
	if len(sel.NodeSelectorTerms) == 0 {
		c.fail(path, "must have at least one term")
	}
	terms = make([]term, len(sel.NodeSelectorTerms))
	for i, t := range sel.NodeSelectorTerms {
		terms[i] = c.term(t, fmt.Sprintf("%s[%d]", path, i))
	}
	return terms, true
}

func (c *compiler) term(t schema.NodeSelectorTerm, path string) term {
	var out term
	for i, r := range t.MatchExpressions {
		out.expressions = append(out.expressions, c.labelRequirement(r, fmt.Sprintf("%s.matchExpressions[%d]", path, i)))
	}
	for i, r := range t.MatchFields {
		out.fields = append(out.fields, c.fieldRequirement(r, fmt.Sprintf("%s.matchFields[%d]", path, i)))
	}
	return out
}

func (c *compiler) labelRequirement(r schema.NodeSelectorRequirement, path string) requirement {
	if r.Key == "" {
		c.fail(path+".key", "must not be empty")
	}
	op, known := operators[r.Operator]
	if !known {
		c.fail(path+".operator", "%q is not a valid operator (want In, NotIn, Exists, DoesNotExist, Gt or Lt)", r.Operator)
		return requirement{key: r.Key}
	}
	out := newRequirement(r.Key, op, r.Values)
	switch op {
	case opIn, opNotIn:
		if len(r.Values) == 0 {
			c.fail(path+".values", "%s needs at least one value", r.Operator)
		}
	case opExists, opDoesNotExist:
		if len(r.Values) != 0 {
			c.fail(path+".values", "%s takes no values, got %d", r.Operator, len(r.Values))
		}
	case opGt, opLt:
		out.bound = c.bound(r, path)
	}
	return out
}

// bound parses the single integer value of a Gt or Lt requirement.
func (c *compiler) bound(r schema.NodeSelectorRequirement, path string) int64 {
	if len(r.Values) != 1 {
		c.fail(path+".values", "%s needs exactly one integer value, got %d values", r.Operator, len(r.Values))
		return 0
	}
	n, ok := parseInt(r.Values[0])
	if !ok {
		c.fail(path+".values[0]", "%q is not an integer (%s compares the label as a base-10 int64)", r.Values[0], r.Operator)
	}
	return n
}

func (c *compiler) fieldRequirement(r schema.NodeSelectorRequirement, path string) requirement {
	if r.Key != FieldNodeName {
		c.fail(path+".key", "%q is not a supported field (want %s)", r.Key, FieldNodeName)
	}
	op := operators[r.Operator]
	if op != opIn && op != opNotIn {
		c.fail(path+".operator", "%q is not valid for matchFields (want In or NotIn)", r.Operator)
		return requirement{key: r.Key}
	}
	if len(r.Values) != 1 {
		c.fail(path+".values", "%s on %s needs exactly one value, got %d", r.Operator, FieldNodeName, len(r.Values))
	}
	return newRequirement(r.Key, op, r.Values)
}

func (c *compiler) checkTolerations(ts []schema.Toleration) {
	for i, t := range ts {
		path := fmt.Sprintf("%s[%d]", pathTolerations, i)
		switch t.Operator {
		case "", schema.TolerationOpEqual:
			if t.Key == "" {
				c.fail(path+".operator", "must be Exists when key is empty (an empty key with Exists tolerates every taint)")
			}
		case schema.TolerationOpExists:
			if t.Value != "" {
				c.fail(path+".value", "must be empty when operator is Exists, got %q", t.Value)
			}
		default:
			c.fail(path+".operator", "%q is not a valid operator (want Equal or Exists)", t.Operator)
		}
		switch t.Effect {
		case "", schema.TaintNoSchedule, schema.TaintPreferNoSchedule, schema.TaintNoExecute:
		default:
			c.fail(path+".effect", "%q is not a valid effect (want NoSchedule, PreferNoSchedule, NoExecute or empty for all)", t.Effect)
		}
		if t.TolerationSeconds != nil && t.Effect != schema.TaintNoExecute {
			c.fail(path+".tolerationSeconds", "needs effect NoExecute, got %q", t.Effect)
		}
	}
}

// maxTolerationSeconds keeps tolerationSeconds within time.Duration.
const maxTolerationSeconds = int64(1<<63-1) / int64(time.Second)

func compileTolerations(ts []schema.Toleration) []toleration {
	out := make([]toleration, len(ts))
	for i, t := range ts {
		out[i] = toleration{
			key:    t.Key,
			value:  t.Value,
			effect: t.Effect,
			exists: t.Operator == schema.TolerationOpExists,
		}
		if t.TolerationSeconds != nil {
			// Kubernetes evicts at once for zero or negative seconds.
			secs := min(max(*t.TolerationSeconds, 0), maxTolerationSeconds)
			out[i].bounded = true
			out[i].seconds = time.Duration(secs) * time.Second
		}
	}
	return out
}
