package rollout

import (
	"slices"

	"github.com/edgeset/edgeset/schema"
)

// Download before switch (spec.rollout.prefetch). Every node on an older
// revision that serves the daemon and whose agent prefetches is asked to
// download the target's images while its old instance keeps running, at
// most MaxConcurrent nodes of each site at once; such a node switches only
// once it reports them present, so its daemon is down for the restart, not
// for the download. Step decides both, purely:
//
//   - the gate (prefetchOf): a node that waits for its download is in
//     PhaseWaitingForPrefetch, not a candidate for a batch, not failed, and
//     runs no deadline. Nodes whose instance is unavailable switch without
//     waiting (their daemon is down anyway), as do nodes whose agent does
//     not prefetch (counted in PrefetchCounts.Unsupported).
//   - the asks (decidePrefetch): in name order, a node that finished keeps
//     its ask without counting (its agent reports it only while asked);
//     a node asked before keeps its ask while its site has room; then,
//     unless the rollout is paused, the other nodes that wait for their
//     download are asked while their site has room. A node offline past
//     the grace is asked nothing and holds no room: it is asked again once
//     back, so a node that never returns does not stall its site.

// Prefetch is spec.rollout.prefetch resolved.
type Prefetch struct {
	// Key is the node label whose values name the sites; nodes without it
	// form one site of their own.
	Key string
	// MaxConcurrent bounds the nodes of one site downloading at once (at
	// least 1).
	MaxConcurrent int
	// keyDefaulted: neither the spec nor a per-site budget named a key,
	// so Key is DefaultSiteLabel until UseSiteLabel gives the controller's.
	keyDefaulted bool
}

// DefaultSiteLabel is the prefetch topology key when neither the daemonset
// nor the controller (UseSiteLabel) names one.
const DefaultSiteLabel = "site"

// prefetchFromSpec resolves spec.rollout.prefetch; nil when it is not on.
// The topology key is the prefetch's own, else the per-site budget's, else
// DefaultSiteLabel.
func prefetchFromSpec(r *schema.RolloutPolicy) *Prefetch {
	if !r.Prefetch.On() {
		return nil
	}
	pf := &Prefetch{Key: r.Prefetch.TopologyKey, MaxConcurrent: max(r.Prefetch.Concurrency(), 1)}
	if pf.Key == "" && r.MaxUnavailablePerTopology != nil {
		pf.Key = r.MaxUnavailablePerTopology.TopologyKey
	}
	if pf.Key == "" {
		pf.Key, pf.keyDefaulted = DefaultSiteLabel, true
	}
	return pf
}

// UseSiteLabel makes label (the controller's site-label) the prefetch
// topology key of a strategy whose daemonset names none.
func (s *Strategy) UseSiteLabel(label string) {
	if s.Prefetch == nil || !s.Prefetch.keyDefaulted || label == "" {
		return
	}
	pf := *s.Prefetch
	pf.Key = label
	s.Prefetch = &pf
}

// prefetchEqual reports whether a and b prefetch alike.
func prefetchEqual(a, b *Prefetch) bool {
	return a == b || a != nil && b != nil && a.Key == b.Key && a.MaxConcurrent == b.MaxConcurrent
}

// prefetchDomainOf is the prefetch site of a node with these labels (""
// without prefetching).
func (s *Strategy) prefetchDomainOf(labels map[string]string) string {
	if s.Prefetch == nil {
		return ""
	}
	if v, ok := labels[s.Prefetch.Key]; ok {
		return v
	}
	return noDomain
}

// prefetchFlags is a node's prefetch standing in a pass.
type prefetchFlags uint8

const (
	// pfWants: on an older revision, reachable, serving, and its agent
	// prefetches: it downloads the target's images before it switches.
	pfWants prefetchFlags = 1 << iota
	// pfDone: it reports the target's images present.
	pfDone
	// pfHolding: wants, not done, and already asked to prefetch the
	// target: it keeps its ask while its site has room.
	pfHolding
	// pfWaits: wants and not done, under a strategy that switches nodes
	// (not OnDelete): PhaseWaitingForPrefetch unless a window is closed.
	pfWaits
	// pfNode, pfNodeDone and pfUnsupported count the node in
	// PrefetchCounts.Nodes, .Done and .Unsupported.
	pfNode
	pfNodeDone
	pfUnsupported
)

func (f prefetchFlags) has(g prefetchFlags) bool { return f&g != 0 }

// candidate reports whether the node waits for its download and has no
// ask yet: it is asked when its site has room.
func (f prefetchFlags) candidate() bool { return f.has(pfWants) && !f.has(pfDone|pfHolding) }

// PrefetchCounts counts a rollout's downloads under spec.rollout.prefetch.
type PrefetchCounts struct {
	// Nodes are the reachable nodes whose agents prefetch that run the
	// target or wait on an older revision, serving; Done those of them
	// that run the target or have its images. "prefetched Done / Nodes".
	Nodes int `json:"nodes"`
	Done  int `json:"done"`
	// Downloading counts the nodes asked to prefetch that are not done.
	Downloading int `json:"downloading"`
	// Unsupported counts the reachable nodes on an older revision whose
	// agent does not prefetch: they switch without.
	Unsupported int `json:"unsupported,omitempty"`
}

// add counts a node's flags delta times (1 or -1).
func (c *PrefetchCounts) add(f prefetchFlags, delta int) {
	if f.has(pfNode) {
		c.Nodes += delta
	}
	if f.has(pfNodeDone) {
		c.Done += delta
	}
	if f.has(pfUnsupported) {
		c.Unsupported += delta
	}
}

// prefetchOf is v's prefetch standing before any batch moves.
func (p *pass) prefetchOf(v *nodeView) prefetchFlags {
	if p.s.Prefetch == nil || v.offline {
		return 0
	}
	older := len(v.Assigned) > 0 && !v.onTarget
	switch {
	case !v.CanPrefetch && older:
		return pfUnsupported
	case !v.CanPrefetch:
		return 0
	case v.onTarget:
		return pfNode | pfNodeDone
	case !older || !v.available:
		return 0
	}
	f := pfWants | pfNode
	if slices.Contains(v.Prefetched, p.st.Target) {
		return f | pfDone | pfNodeDone
	}
	if v.Prefetching == p.st.Target {
		f |= pfHolding
	}
	if !p.s.OnDelete {
		f |= pfWaits
	}
	return f
}

// decidePrefetch decides which nodes are asked to prefetch the target:
// the finished ones, those asked before while their site has room, then,
// unless the rollout is held, the others in name order while their site
// has room.
func (p *pass) decidePrefetch() {
	if p.s.Prefetch == nil {
		return
	}
	limit := p.s.Prefetch.MaxConcurrent
	downloading := map[string]int{}
	var candidates []*nodeView
	for i := range p.view {
		v := &p.view[i]
		site := p.viewPrefetchDomain(v)
		switch {
		case !v.pf.has(pfWants):
		case v.pf.has(pfDone):
			p.ask(v.Name)
		case v.pf.has(pfHolding) && downloading[site] < limit:
			p.ask(v.Name)
			downloading[site]++
		default:
			candidates = append(candidates, v)
		}
	}
	for _, v := range candidates {
		if site := p.viewPrefetchDomain(v); !p.held() && downloading[site] < limit {
			p.ask(v.Name)
			downloading[site]++
		}
	}
	for _, n := range downloading {
		p.status.Prefetch.Downloading += n
	}
}

// ask asks node to prefetch the target.
func (p *pass) ask(node string) {
	if p.asks == nil {
		p.asks = map[string]string{}
	}
	p.asks[node] = p.st.Target
}

// viewPrefetchDomain is v's prefetch site: resolved by a Tracker, or read
// from its labels.
func (p *pass) viewPrefetchDomain(v *nodeView) string {
	if v.resolved {
		return v.Node.pfDomain
	}
	return p.s.prefetchDomainOf(v.Labels)
}

// samePrefetchKey reports whether a and b read the same label of a node:
// both off, or both on with one topology key.
func samePrefetchKey(a, b *Prefetch) bool {
	return (a == nil) == (b == nil) && (a == nil || a.Key == b.Key)
}
