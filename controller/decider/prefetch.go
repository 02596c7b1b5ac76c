package decider

import (
	"slices"

	"github.com/edgeset/edgeset/controller/reconcile"
	"github.com/edgeset/edgeset/controller/rollout"
	"github.com/edgeset/edgeset/schema"
)

// Download before switch, as the decider sees it: a node's prefetch facts
// for a rollout are whether its agent prefetches (schema.LabelPrefetch),
// the revision of the daemonset its published desired state asks it to
// prefetch, and the revisions it reports done; stage three puts the
// rollout's asks into the node's desired state, or keeps the published
// ones where the rollout made none.

// canPrefetch reports whether node n's agent announces that it prefetches.
func canPrefetch(n *Node) bool {
	return n.Model != nil && n.Model.Labels[schema.LabelPrefetch] == "true"
}

// askOf is the revision of daemonset key that nd asks its node to
// prefetch ("" for none).
func askOf(nd reconcile.NodeDesired, key string) string {
	for _, in := range nd.Prefetch {
		if in.DaemonSet == key {
			return in.Revision
		}
	}
	return ""
}

// prefetchFacts fills rn's prefetch facts for the rollout of daemonset key
// in state st. Of the prefetches n reports done, it keeps those of the
// revisions the rollout can ask for (the target, the stable and previous
// revisions a rollback returns to), as rolloutNode does with instances.
func prefetchFacts(n *node, key string, st rollout.State, rn *rollout.Node) {
	rn.CanPrefetch = canPrefetch(&n.Node)
	rn.Prefetching = askOf(n.Current, key)
	for _, p := range n.Prefetch {
		if p.DaemonSet != key || !p.Done {
			continue
		}
		if r := p.Revision; r == st.Target || r == st.Stable || r == st.Previous {
			rn.Prefetched = append(rn.Prefetched, r)
		}
	}
}

// samePrefetchFacts reports whether a and b are the same node as far as
// the prefetch of daemonset key sees it: the agent's capability, the ask
// published, and the prefetches reported done (progress alone is no fact
// of the rollout's).
func samePrefetchFacts(a, b *Node, key string) bool {
	if canPrefetch(a) != canPrefetch(b) || askOf(a.Current, key) != askOf(b.Current, key) {
		return false
	}
	return slices.Equal(donePrefetches(a.Prefetch, key), donePrefetches(b.Prefetch, key))
}

// donePrefetches lists the revisions of daemonset key reported done.
func donePrefetches(reports []schema.PrefetchStatus, key string) []string {
	var out []string
	for _, p := range reports {
		if p.DaemonSet == key && p.Done {
			out = append(out, p.Revision)
		}
	}
	return out
}

// prefetchOf is stage three's prefetch choice for node n: the rollout's
// ask where its step made one this decision, the published one otherwise.
func (d *Decider) prefetchOf(n *node) func(k int) string {
	return func(k int) string {
		if ask, ok := d.asks[k][n.Name]; ok {
			return ask
		}
		return askOf(n.Current, d.slots[d.plannerK[k]].Key)
	}
}
