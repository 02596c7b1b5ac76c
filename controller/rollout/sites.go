package rollout

import (
	"math/bits"
	"time"

	"github.com/edgeset/edgeset/controller/rollout/window"
)

// noDomain is the domain of the nodes without the topology label: one
// domain of their own (a label value cannot hold a NUL).
const noDomain = "\x00"

// domainOf is the topology domain of a node with these labels ("" when
// the strategy has no per-topology budget).
func (s *Strategy) domainOf(labels map[string]string) string {
	if s.Topology == nil {
		return ""
	}
	if v, ok := labels[s.Topology.Key]; ok {
		return v
	}
	return noDomain
}

// windowsOf is the set of the strategy's windows that select a node with
// these labels, one bit per window.
func (s *Strategy) windowsOf(labels map[string]string) uint16 {
	var mask uint16
	for i, w := range s.Windows {
		if i < 16 && w.Selects(labels) {
			mask |= 1 << i
		}
	}
	return mask
}

// SameNodeFacts reports whether strategies a and b read the same of a
// node's labels: the same topology key, the same windows' selectors and
// the same prefetch topology key.
// A Tracker whose strategy changes to one that does not needs its nodes
// Set again (SetStrategy says so).
func SameNodeFacts(a, b Strategy) bool {
	if (a.Topology == nil) != (b.Topology == nil) || a.Topology != nil && a.Topology.Key != b.Topology.Key {
		return false
	}
	if len(a.Windows) != len(b.Windows) || !samePrefetchKey(a.Prefetch, b.Prefetch) {
		return false
	}
	for i := range a.Windows {
		if !a.Windows[i].Equal(b.Windows[i]) {
			return false
		}
	}
	return true
}

// ScheduleEqual reports whether a and b have the same per-topology budget,
// maintenance windows and prefetch policy.
func ScheduleEqual(a, b Strategy) bool {
	if !SameNodeFacts(a, b) {
		return false
	}
	return (a.Topology == nil || a.Topology.MaxUnavailable == b.Topology.MaxUnavailable) && prefetchEqual(a.Prefetch, b.Prefetch)
}

// SameLabelFacts reports whether nodes with labels a and b are the same to
// strategy s: the same domain and the same windows.
func (s *Strategy) SameLabelFacts(a, b map[string]string) bool {
	return s.domainOf(a) == s.domainOf(b) && s.windowsOf(a) == s.windowsOf(b) && s.prefetchDomainOf(a) == s.prefetchDomainOf(b)
}

// domainLimit is how many of a domain's total nodes may be in flight:
// maxUnavailablePerTopology scaled, rounded up, at least one.
func (p *pass) domainLimit(total int) int {
	n, err := p.s.Topology.MaxUnavailable.Scaled(total, true)
	if err != nil || n < 1 {
		return 1
	}
	return n
}

// domainCount is one domain's nodes in a full pass.
type domainCount struct {
	total    int
	inFlight int // unavailable reachable nodes, or surge pairs with maxSurge
}

// countDomains counts every viewed node by domain, after this pass's
// assignments so far; nil without a per-topology budget.
func (p *pass) countDomains(surge bool) map[string]*domainCount {
	if p.s.Topology == nil {
		return nil
	}
	out := map[string]*domainCount{}
	for i := range p.view {
		v := &p.view[i]
		domain := p.viewDomain(v)
		c := out[domain]
		if c == nil {
			c = &domainCount{}
			out[domain] = c
		}
		c.total++
		assigned := p.out[v.Name]
		switch {
		case surge && len(assigned) > 1:
			c.inFlight++
		case !surge && p.inFlight(v, assigned):
			c.inFlight++
		}
	}
	return out
}

// takeDomain reports whether v's domain has room for one more node in
// flight, and counts it if so.
func (p *pass) takeDomain(domains map[string]*domainCount, v *nodeView) bool {
	if domains == nil {
		return true
	}
	c := domains[p.viewDomain(v)]
	if c.inFlight >= p.domainLimit(c.total) {
		return false
	}
	c.inFlight++
	return true
}

// windowStates are the strategy's windows at p.now, computed once a pass.
func (p *pass) windowStates() []window.State {
	win := p.windows()
	if win.states == nil {
		win.states = make([]window.State, len(p.s.Windows))
		for i, w := range p.s.Windows {
			win.states[i] = w.At(p.now)
		}
	}
	return win.states
}

func (p *pass) windows() *passWindows {
	if p.win == nil {
		p.win = &passWindows{}
	}
	return p.win
}

// viewDomain is v's topology domain: resolved by a Tracker, or read from
// its labels.
func (p *pass) viewDomain(v *nodeView) string {
	if v.resolved {
		return v.Node.domain
	}
	return p.s.domainOf(v.Labels)
}

// viewWindows is the set of maintenance windows that select v.
func (p *pass) viewWindows(v *nodeView) uint16 {
	if v.resolved {
		return v.Node.windows
	}
	return p.s.windowsOf(v.Labels)
}

// maintenanceOpen reports whether a window that selects v is open now, and asks
// for a requeue when any of them opens or closes. A node no window selects
// waits: when windows are declared, a node is updated only inside one.
func (p *pass) maintenanceOpen(v *nodeView) bool {
	if len(p.s.Windows) == 0 {
		return true
	}
	states, open := p.windowStates(), false
	for mask := p.viewWindows(v); mask != 0; mask &= mask - 1 {
		st := states[bits.TrailingZeros16(mask)]
		open = open || st.Open
		if !st.Change.IsZero() {
			p.requeue(st.Change)
		}
	}
	return open
}

// countWindows counts a node waiting for the windows of mask.
func (p *pass) countWindows(mask uint16, delta int) {
	win := p.windows()
	if win.waiting == nil {
		win.waiting = make([]int, 16)
	}
	for ; mask != 0; mask &= mask - 1 {
		win.waiting[bits.TrailingZeros16(mask)] += delta
	}
}

// nextWindow is when the first window a waiting node waits for opens.
func (p *pass) nextWindow() time.Time {
	var next time.Time
	if len(p.s.Windows) == 0 {
		return next
	}
	states := p.windowStates()
	for i, n := range p.windows().waiting {
		if n > 0 && i < len(states) && !states[i].Open {
			next = earliest(next, states[i].Change)
		}
	}
	return next
}
