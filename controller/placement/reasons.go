package placement

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/edgeset/edgeset/schema"
)

// Reasons says, in words, every reason the daemon should not run on the node:
// each nodeSelector label that is missing or differs, why each node affinity
// term failed, each untolerated NoSchedule or NoExecute taint and each
// NoExecute toleration that has run out. It is nil when ShouldRun is true (and
// for the zero Decision) and never empty when Decide answered no.
//
// Reasons reads the node given to Decide again, so call it before that node
// changes. Unlike Decide it allocates: it is meant for answers shown to
// people (explain, describe, events).
func (d Decision) Reasons() []string {
	if d.ShouldRun || d.policy == nil || d.node == nil {
		return nil
	}
	p, node := d.policy, d.node
	out := p.selectorReasons(node)
	if r, ok := p.affinityReason(node); ok {
		out = append(out, r)
	}
	return append(out, p.taintReasons(node, d.now)...)
}

func (p *Policy) selectorReasons(node *schema.Node) []string {
	var out []string
	for _, want := range p.nodeSelector {
		v, ok := node.Labels[want.key]
		switch {
		case !ok:
			out = append(out, fmt.Sprintf("node selector: label %q is missing, want %q", want.key, want.value))
		case v != want.value:
			out = append(out, fmt.Sprintf("node selector: label %q is %q, want %q", want.key, v, want.value))
		}
	}
	return out
}

// affinityReason explains, term by term, why no required node affinity term
// matches node. ok is false when one matches or there is no affinity.
func (p *Policy) affinityReason(node *schema.Node) (reason string, ok bool) {
	if p.affinityMatches(node) {
		return "", false
	}
	parts := make([]string, len(p.affinity))
	for i := range p.affinity {
		parts[i] = fmt.Sprintf("term %d: %s", i, p.affinity[i].failure(node))
	}
	return "node affinity: no term matched (" + strings.Join(parts, "; ") + ")", true
}

// failure describes the first requirement of t that node fails.
func (t *term) failure(node *schema.Node) string {
	if t.isEmpty() {
		return "an empty term matches no node"
	}
	i := t.firstFailure(node)
	if i < len(t.expressions) {
		r := &t.expressions[i]
		v, ok := node.Labels[r.key]
		return fmt.Sprintf("%q %s: %s", r.key, r.describe(), labelState(r, v, ok))
	}
	r := &t.fields[i-len(t.expressions)]
	return fmt.Sprintf("%s %s: node name is %q", r.key, r.describe(), node.Name)
}

// describe renders the operator and values: `In [a b]`, `Exists`, `Gt 4`.
func (r *requirement) describe() string {
	switch r.op {
	case opIn, opNotIn:
		return r.op.String() + " [" + strings.Join(r.values, " ") + "]"
	case opGt, opLt:
		return r.op.String() + " " + strconv.FormatInt(r.bound, 10)
	}
	return r.op.String()
}

func labelState(r *requirement, v string, present bool) string {
	switch {
	case !present:
		return "label is missing"
	case r.op == opGt || r.op == opLt:
		if _, ok := parseInt(v); !ok {
			return fmt.Sprintf("label is %q, not an integer", v)
		}
	}
	return fmt.Sprintf("label is %q", v)
}

func (p *Policy) taintReasons(node *schema.Node, now time.Time) []string {
	var out []string
	if node.Unschedulable {
		out = p.appendTaintReason(out, &cordonTaint, now)
	}
	for i := range node.Taints {
		out = p.appendTaintReason(out, &node.Taints[i], now)
	}
	return out
}

func (p *Policy) appendTaintReason(out []string, taint *schema.Taint, now time.Time) []string {
	if taint.Effect != schema.TaintNoSchedule && taint.Effect != schema.TaintNoExecute {
		return out
	}
	i := p.firstToleration(taint)
	if i < 0 {
		return append(out, fmt.Sprintf("taint %s is not tolerated", taintString(taint)))
	}
	if taint.Effect != schema.TaintNoExecute {
		return out
	}
	t := &p.tolerations[i]
	if at, bounded := t.deadline(taint, now); bounded && !now.Before(at) {
		return append(out, fmt.Sprintf("taint %s was tolerated for %ds, until %s",
			taintString(taint), int64(t.seconds/time.Second), at.UTC().Format(time.RFC3339)))
	}
	return out
}

// taintString renders a taint as Kubernetes does: key=value:effect, or
// key:effect when the value is empty.
func taintString(t *schema.Taint) string {
	if t.Value == "" {
		return t.Key + ":" + t.Effect
	}
	return t.Key + "=" + t.Value + ":" + t.Effect
}
