package placement

import "github.com/edgeset/edgeset/schema"

// operator is a compiled node selector operator.
type operator uint8

const (
	opIn operator = iota + 1
	opNotIn
	opExists
	opDoesNotExist
	opGt
	opLt
)

var operators = map[string]operator{
	schema.NodeOpIn:           opIn,
	schema.NodeOpNotIn:        opNotIn,
	schema.NodeOpExists:       opExists,
	schema.NodeOpDoesNotExist: opDoesNotExist,
	schema.NodeOpGt:           opGt,
	schema.NodeOpLt:           opLt,
}

func (op operator) String() string {
	switch op {
	case opIn:
		return schema.NodeOpIn
	case opNotIn:
		return schema.NodeOpNotIn
	case opExists:
		return schema.NodeOpExists
	case opDoesNotExist:
		return schema.NodeOpDoesNotExist
	case opGt:
		return schema.NodeOpGt
	case opLt:
		return schema.NodeOpLt
	}
	return "invalid"
}

// setThreshold is the number of In/NotIn values above which a requirement
// looks values up in a map rather than scanning them.
const setThreshold = 8

// requirement is one compiled matchExpressions or matchFields entry.
type requirement struct {
	key    string
	op     operator
	values []string            // In, NotIn: as written
	set    map[string]struct{} // In, NotIn with many values: the same values
	bound  int64               // Gt, Lt: the parsed value
}

func newRequirement(key string, op operator, values []string) requirement {
	r := requirement{key: key, op: op, values: append([]string(nil), values...)}
	if (op == opIn || op == opNotIn) && len(values) > setThreshold {
		r.set = make(map[string]struct{}, len(values))
		for _, v := range values {
			r.set[v] = struct{}{}
		}
	}
	return r
}

func (r *requirement) has(v string) bool {
	if r.set != nil {
		_, ok := r.set[v]
		return ok
	}
	for _, w := range r.values {
		if w == v {
			return true
		}
	}
	return false
}

// matchesLabel reports whether a label whose value is v (present says whether
// the node has it at all) satisfies r, as Kubernetes labels.Requirement does:
// NotIn and DoesNotExist hold for a missing label, Gt and Lt need a present
// label that parses as a base-10 int64.
func (r *requirement) matchesLabel(v string, present bool) bool {
	switch r.op {
	case opIn:
		return present && r.has(v)
	case opNotIn:
		return !present || !r.has(v)
	case opExists:
		return present
	case opDoesNotExist:
		return !present
	case opGt, opLt:
		if !present {
			return false
		}
		n, ok := parseInt(v)
		if !ok {
			return false
		}
		if r.op == opGt {
			return n > r.bound
		}
		return n < r.bound
	}
	return false
}

// matchesField reports whether a node named name satisfies a matchFields
// requirement; Compile admits only metadata.name with In or NotIn.
func (r *requirement) matchesField(name string) bool {
	switch r.op {
	case opIn:
		return r.has(name)
	case opNotIn:
		return !r.has(name)
	}
	return false
}

// term is one compiled nodeSelectorTerm: every expression and field must
// match. A term with neither matches no node, as in Kubernetes.
type term struct {
	expressions []requirement
	fields      []requirement
}

func (t *term) isEmpty() bool { return len(t.expressions) == 0 && len(t.fields) == 0 }

// firstFailure returns the index of the first requirement node fails (the
// expressions first, then the fields at len(expressions)+i), or -1 when the
// term matches. An empty term fails at index 0.
func (t *term) firstFailure(node *schema.Node) int {
	if t.isEmpty() {
		return 0
	}
	for i := range t.expressions {
		r := &t.expressions[i]
		v, ok := node.Labels[r.key]
		if !r.matchesLabel(v, ok) {
			return i
		}
	}
	for i := range t.fields {
		if !t.fields[i].matchesField(node.Name) {
			return len(t.expressions) + i
		}
	}
	return -1
}

func (p *Policy) selectorMatches(node *schema.Node) bool {
	for i := range p.nodeSelector {
		want := &p.nodeSelector[i]
		if v, ok := node.Labels[want.key]; !ok || v != want.value {
			return false
		}
	}
	return true
}

func (p *Policy) affinityMatches(node *schema.Node) bool {
	if !p.hasAffinity {
		return true
	}
	for i := range p.affinity {
		if p.affinity[i].firstFailure(node) < 0 {
			return true
		}
	}
	return false
}

// parseInt parses s exactly as strconv.ParseInt(s, 10, 64) does (an optional
// sign, then decimal digits, within int64), but reports failure without
// allocating an error.
func parseInt(s string) (int64, bool) {
	neg := false
	if s != "" && (s[0] == '+' || s[0] == '-') {
		neg = s[0] == '-'
		s = s[1:]
	}
	if s == "" {
		return 0, false
	}
	const limit = uint64(1) << 63 // magnitude of the smallest int64
	var u uint64
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' || u > limit/10 {
			return 0, false
		}
		u = u*10 + uint64(c-'0')
		if u > limit {
			return 0, false
		}
	}
	if neg {
		return -int64(u), true // -int64(1<<63) wraps to the smallest int64, as wanted
	}
	if u == limit {
		return 0, false
	}
	return int64(u), true
}
