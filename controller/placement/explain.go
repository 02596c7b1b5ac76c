package placement

import (
	"slices"
	"strings"
	"time"

	"github.com/edgeset/edgeset/schema"
)

// Result is the placement of one daemonset on one node in words, as
// `edgesetctl explain` and the controller's describe show it.
type Result struct {
	Node        string `json:"node"`
	DaemonSet   string `json:"daemonset"` // "namespace/name"
	Run         bool   `json:"run"`
	KeepRunning bool   `json:"keepRunning"`
	// EvictAt is set when a running instance must stop then because a
	// NoExecute toleration runs out (see Decision.EvictAt).
	EvictAt *time.Time `json:"evictAt,omitempty"`
	// Reasons is empty, never nil, when Run is true.
	Reasons []string `json:"reasons"`
}

// Explain compiles ds and decides it for every node at now. The results are
// sorted by node name (nodes with the same name keep their order); nodes is
// not modified. It fails only when ds does not compile (see Compile).
func Explain(ds *schema.DaemonSet, nodes []schema.Node, now time.Time) ([]Result, error) {
	p, err := Compile(ds)
	if err != nil {
		return nil, err
	}
	return p.Explain(nodes, now), nil
}

// Explain decides p for every node at now and renders the decisions, sorted
// by node name as the package-level Explain does.
func (p *Policy) Explain(nodes []schema.Node, now time.Time) []Result {
	out := make([]Result, len(nodes))
	for i := range nodes {
		out[i] = p.result(&nodes[i], now)
	}
	slices.SortStableFunc(out, func(a, b Result) int { return strings.Compare(a.Node, b.Node) })
	return out
}

func (p *Policy) result(node *schema.Node, now time.Time) Result {
	d := p.Decide(node, now)
	r := Result{
		Node:        node.Name,
		DaemonSet:   p.daemonSet,
		Run:         d.ShouldRun,
		KeepRunning: d.ShouldContinueRunning,
		Reasons:     d.Reasons(),
	}
	if r.Reasons == nil {
		r.Reasons = []string{}
	}
	if !d.EvictAt.IsZero() {
		at := d.EvictAt
		r.EvictAt = &at
	}
	return r
}
