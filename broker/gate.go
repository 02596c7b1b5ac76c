package broker

import (
	"net"
	"net/netip"
	"sync"
	"time"
)

// Reasons a connection is refused at accept: the reason label of
// edgeset_broker_connections_refused_total.
const (
	refusedPending = "pending_limit" // Limits.MaxPendingConnections reached
	refusedSource  = "source_limit"  // Limits.MaxConnectionsPerSource reached
	refusedBackoff = "auth_backoff"  // the source failed to log in too often
)

// gate decides which new connections may be served. It bounds the
// connections that have not authenticated yet (pending) and the connections
// from one source address, and refuses a source for Limits.AuthFailureBackoff
// once it has failed Limits.AuthFailureLimit logins within
// Limits.AuthFailureWindow. Sources in Limits.ExemptSources are subject to
// neither the per-source cap nor the back-off.
type gate struct {
	limits Limits
	now    func() time.Time

	mu      sync.Mutex
	pending int                    // guarded by mu: admitted, not yet authenticated
	sources map[netip.Addr]*source // guarded by mu, keyed by sourceKey
	sweepAt int                    // guarded by mu: len(sources) that triggers a sweep
}

// source is what the gate knows of one address.
type source struct {
	conns        int       // open connections
	failures     int       // failed logins since windowStart
	windowStart  time.Time // start of the current failure window
	blockedUntil time.Time // refused until then
}

// minSweep is the smallest number of sources that triggers a sweep of the
// forgotten ones (no connection, no live failure window, no back-off).
const minSweep = 1024

func newGate(l Limits, now func() time.Time) *gate {
	return &gate{limits: l, now: now, sources: map[netip.Addr]*source{}, sweepAt: minSweep}
}

// admit counts a new connection from addr as pending, or returns why it is
// refused.
func (g *gate) admit(addr netip.Addr) (refused string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	now := g.now()
	exempt := g.exempt(addr)
	key := g.keyOf(addr, exempt)
	s := g.sources[key]
	switch {
	case !exempt && s != nil && now.Before(s.blockedUntil):
		return refusedBackoff
	case g.pending >= g.limits.MaxPendingConnections:
		return refusedPending
	case !exempt && s != nil && s.conns >= g.limits.MaxConnectionsPerSource:
		return refusedSource
	}
	if s == nil {
		s = g.sourceLocked(key, now)
	}
	s.conns++
	g.pending++
	return ""
}

// authenticated moves an admitted connection out of pending.
func (g *gate) authenticated() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.pending--
}

// release forgets an admitted connection from addr; pending says whether it
// had not authenticated.
func (g *gate) release(addr netip.Addr, pending bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if pending {
		g.pending--
	}
	key := g.keyOf(addr, g.exempt(addr))
	if s := g.sources[key]; s != nil {
		s.conns--
		if g.idle(s, g.now()) {
			delete(g.sources, key)
		}
	}
}

// failed records a failed login from addr and reports whether it started a
// back-off.
func (g *gate) failed(addr netip.Addr) (blocked bool) {
	if g.exempt(addr) {
		return false
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	now := g.now()
	key := sourceKey(addr)
	s := g.sources[key]
	if s == nil {
		s = g.sourceLocked(key, now)
	}
	if now.Sub(s.windowStart) >= g.limits.AuthFailureWindow {
		s.windowStart, s.failures = now, 0
	}
	s.failures++
	if s.failures < g.limits.AuthFailureLimit {
		return false
	}
	s.blockedUntil = now.Add(g.limits.AuthFailureBackoff)
	s.windowStart, s.failures = now, 0
	return true
}

// counts returns the pending connections and the sources tracked.
func (g *gate) counts() (pending, sources int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.pending, len(g.sources)
}

// sourceKey is the source addr is limited as: the address itself for IPv4,
// its /64 network for IPv6, as the API limits it (one host commonly holds a
// whole /64, so counting single addresses would let it open a connection,
// or fail a login, from each of 2^64 addresses). The zone is dropped.
func sourceKey(addr netip.Addr) netip.Addr {
	if !addr.Is6() {
		return addr
	}
	p, err := addr.Prefix(64)
	if err != nil {
		return addr
	}
	return p.Addr()
}

// keyOf is the key addr is counted under: its sourceKey, or, when it is
// exempt, the address itself, so that an exempt address (a NAT gateway)
// does not use up the count of the rest of its /64.
func (g *gate) keyOf(addr netip.Addr, exempt bool) netip.Addr {
	if exempt {
		return addr
	}
	return sourceKey(addr)
}

// sourceLocked adds the source key, first sweeping the idle ones when
// the map has grown past sweepAt, so failed logins from ever new addresses
// cannot grow it without bound.
func (g *gate) sourceLocked(key netip.Addr, now time.Time) *source {
	if len(g.sources) >= g.sweepAt {
		for a, s := range g.sources {
			if g.idle(s, now) {
				delete(g.sources, a)
			}
		}
		g.sweepAt = max(minSweep, 2*len(g.sources))
	}
	s := &source{}
	g.sources[key] = s
	return s
}

// idle reports whether s holds nothing worth keeping.
func (g *gate) idle(s *source, now time.Time) bool {
	return s.conns == 0 && !now.Before(s.blockedUntil) &&
		(s.failures == 0 || now.Sub(s.windowStart) >= g.limits.AuthFailureWindow)
}

// exempt reports whether addr is in Limits.ExemptSources.
func (g *gate) exempt(addr netip.Addr) bool {
	for _, p := range g.limits.ExemptSources {
		if p.Contains(addr) {
			return true
		}
	}
	return false
}

// sourceAddr is the IP address of a connection's peer, IPv4-mapped IPv6
// addresses unmapped; the zero Addr when it has none (an in-process pipe).
func sourceAddr(conn net.Conn) netip.Addr {
	ap, err := netip.ParseAddrPort(conn.RemoteAddr().String())
	if err != nil {
		return netip.Addr{}
	}
	return ap.Addr().Unmap()
}
