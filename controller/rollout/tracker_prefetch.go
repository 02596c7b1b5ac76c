package rollout

import "slices"

// The Tracker's part of download before switch. A member's part carries
// its prefetch standing (prefetchOf, a per-node stage) and its prefetch
// site; the sums count, per site, the members that hold an ask and those
// that wait for one. A Step then asks what decidePrefetch asks:
//
//   - a recomputed member's own ask (done, or holding while its site is
//     within the limit) is its own business;
//   - in each site with room and members waiting for an ask, the first of
//     them by name, from the site's heap, are asked.
//
// A site holding more asks than the limit (a node relabelled into it)
// is left to a full Step, which alone decides whose ask goes.

// flagPrefetchQueued marks, in member.waiting, a member whose name is in
// its prefetch site's heap (Tracker.pfWaiting). The part flags use the
// low bits.
const flagPrefetchQueued uint8 = 1 << 7

// prefetchTotals are one prefetch site's parts, summed.
type prefetchTotals struct {
	holders    int // asked before, not done
	candidates int // waiting for their download, no ask yet
}

// addPrefetch counts pt's download delta times.
func (s *totals) addPrefetch(pt part, delta int) {
	s.status.Prefetch.add(pt.pf, delta)
	if !pt.pf.has(pfWants) {
		return
	}
	for int(pt.pfDomain) >= len(s.pfDomains) {
		s.pfDomains = append(s.pfDomains, prefetchTotals{})
	}
	d := &s.pfDomains[pt.pfDomain]
	switch {
	case pt.pf.candidate():
		d.candidates += delta
		s.pfCandidates += delta
	case pt.pf.has(pfHolding) && !pt.pf.has(pfDone):
		d.holders += delta
		s.pfHolders += delta
	}
}

// setPrefetchFacts stores n's prefetch facts in m.
func (m *member) setPrefetchFacts(n *Node, s *Strategy, names, domains *interner) {
	m.canPrefetch = n.CanPrefetch
	m.prefetching = names.id(n.Prefetching)
	m.pfDomain = domains.id(s.prefetchDomainOf(n.Labels))
	for _, rev := range n.Prefetched {
		m.overflow().prefetched = append(m.extra.prefetched, names.id(rev))
	}
}

// prefetchFactsEqual reports whether a and b hold the same prefetch facts.
func prefetchFactsEqual(a, b *member) bool {
	if a.canPrefetch != b.canPrefetch || a.prefetching != b.prefetching || a.pfDomain != b.pfDomain {
		return false
	}
	var pa, pb []uint32
	if a.extra != nil {
		pa = a.extra.prefetched
	}
	if b.extra != nil {
		pb = b.extra.prefetched
	}
	return slices.Equal(pa, pb)
}

// prefetchNode fills n's prefetch facts from m.
func (t *Tracker) prefetchNode(m *member, n *Node) {
	n.CanPrefetch = m.canPrefetch
	n.Prefetching = t.names.str(m.prefetching)
	n.pfDomain, n.pfDomainID = t.domains.str(m.pfDomain), m.pfDomain
	if m.extra != nil && len(m.extra.prefetched) > 0 {
		n.Prefetched = make([]string, len(m.extra.prefetched))
		for k, id := range m.extra.prefetched {
			n.Prefetched[k] = t.names.str(id)
		}
	}
}

// prefetchOverLimit reports whether the site of a recomputed member holds
// more asks than the limit.
func (t *Tracker) prefetchOverLimit(idx []int32) bool {
	if t.s.Prefetch == nil {
		return false
	}
	for _, i := range idx {
		m := &t.members[i]
		if m.part.pf.has(pfWants) && t.sum.pfDomains[m.part.pfDomain].holders > t.s.Prefetch.MaxConcurrent {
			return true
		}
	}
	return false
}

// askPrefetch is decidePrefetch over the parts: the recomputed members'
// own asks, then the first members of each site with room. It reports
// in d the asks that differ from the members' facts, marks those members
// for the next Step, and counts the downloads in p.status.
func (t *Tracker) askPrefetch(p *pass, idx []int32, d *Delta) {
	for _, i := range idx {
		m := &t.members[i]
		ask := ""
		if m.part.pf.has(pfDone) || m.part.pf.has(pfHolding) {
			ask = p.st.Target
		}
		t.reportAsk(m, ask, d)
	}
	p.status.Prefetch.Downloading = t.sum.pfHolders
	if t.s.Prefetch == nil || p.held() || t.sum.pfCandidates == 0 {
		return
	}
	limit := t.s.Prefetch.MaxConcurrent
	for site, sum := range t.sum.pfDomains {
		if room := limit - sum.holders; room > 0 && sum.candidates > 0 {
			for _, i := range t.firstCandidates(uint32(site), room) {
				t.reportAsk(&t.members[i], p.st.Target, d)
				p.status.Prefetch.Downloading++
			}
		}
	}
}

// reportAsk reports m's ask in d when it differs from m's facts, and marks
// m to be recomputed at the next Step.
func (t *Tracker) reportAsk(m *member, ask string, d *Delta) {
	if ask == t.names.str(m.prefetching) {
		return
	}
	d.reportPrefetch(m.name, ask)
	t.markDirty(m)
}

func (d *Delta) reportPrefetch(node, ask string) {
	if d.Prefetch == nil {
		d.Prefetch = map[string]string{}
	}
	d.Prefetch[node] = ask
}

// enqueuePrefetch puts m's name in its prefetch site's heap when it waits
// for an ask, unless it is there already.
func (t *Tracker) enqueuePrefetch(m *member) {
	if !m.part.pf.candidate() || m.waiting&flagPrefetchQueued != 0 {
		return
	}
	m.waiting |= flagPrefetchQueued
	h := t.prefetchHeap(m.part.pfDomain)
	*h = append(*h, m.name)
	upNames(*h, len(*h)-1)
	if len(*h) > 2*len(t.members)+64 {
		t.compactPrefetch(h, m.part.pfDomain)
	}
}

// prefetchHeap is prefetch site d's heap, grown as sites appear.
func (t *Tracker) prefetchHeap(d uint32) *[]string {
	for int(d) >= len(t.pfWaiting) {
		t.pfWaiting = append(t.pfWaiting, nil)
	}
	return &t.pfWaiting[d]
}

// firstCandidates returns the first n members by name of prefetch site d
// that wait for an ask, leaving them in its heap and dropping its stale
// entries.
func (t *Tracker) firstCandidates(d uint32, n int) []int32 {
	h := t.prefetchHeap(d)
	var out []int32
	var keep []string
	for len(out) < n && len(*h) > 0 {
		name := (*h)[0]
		popName(h)
		i, ok := t.index.find(t.members, name)
		if !ok || slices.Contains(keep, name) {
			continue // removed, or a duplicate
		}
		m := &t.members[i]
		if m.waiting&flagPrefetchQueued == 0 || m.part.pfDomain != d {
			continue // moved to another site
		}
		if !m.part.pf.candidate() {
			m.waiting &^= flagPrefetchQueued // no longer waits for an ask
			continue
		}
		out = append(out, i)
		keep = append(keep, name)
	}
	for _, name := range keep {
		*h = append(*h, name)
		upNames(*h, len(*h)-1)
	}
	return out
}

// compactPrefetch rebuilds h, prefetch site d's heap, from the members
// that wait for an ask there.
func (t *Tracker) compactPrefetch(h *[]string, d uint32) {
	clear(*h)
	*h = (*h)[:0]
	for i := range t.members {
		m := &t.members[i]
		if m.part.pfDomain != d {
			continue
		}
		m.waiting &^= flagPrefetchQueued
		if m.part.pf.candidate() {
			m.waiting |= flagPrefetchQueued
			*h = append(*h, m.name)
		}
	}
	slices.Sort(*h)
}
