package api

import (
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"time"
)

// maxAuthSources bounds the sources an authGuard keeps records of. Past
// it, failures of further sources share one record (overflowSource), so
// an attacker with many addresses is throttled as one.
const maxAuthSources = 4096

// overflowSource names the record shared by sources past maxAuthSources.
const overflowSource = "other sources"

// authGuard counts failed authentications per source, blocks a source
// that fails too often, and rate-limits the log lines about them.
type authGuard struct {
	limit    int           // failures in window that block; 0: never block
	window   time.Duration // counting window, and how long a block lasts
	logEvery time.Duration // one log line per source and logEvery
	log      *slog.Logger
	now      func() time.Time

	mu        sync.Mutex // guards sources and lastPrune
	sources   map[string]*authRecord
	lastPrune time.Time
}

// authRecord is one source's failures.
type authRecord struct {
	windowStart  time.Time // first failure of the current window
	failures     int       // failures since windowStart
	blockedUntil time.Time
	lastLog      time.Time
	suppressed   int // failures not logged since lastLog
}

func newAuthGuard(l Limits, log *slog.Logger) *authGuard {
	return &authGuard{limit: l.AuthFailures, window: l.AuthFailureWindow, logEvery: l.AuthLogInterval,
		log: log, now: time.Now, sources: map[string]*authRecord{}}
}

// blocked returns how much longer source is blocked, 0 if it is not.
func (g *authGuard) blocked(source string) time.Duration {
	g.mu.Lock()
	defer g.mu.Unlock()
	rec, ok := g.sources[source]
	if !ok {
		rec, ok = g.sources[overflowSource]
		if !ok || len(g.sources) < maxAuthSources {
			return 0
		}
	}
	if d := rec.blockedUntil.Sub(g.now()); d > 0 {
		return d
	}
	return 0
}

// failed records a failed authentication of source and logs it unless a
// line about source was logged less than logEvery ago.
func (g *authGuard) failed(source, reason, method, path string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	now := g.now()
	key, rec := g.recordLocked(source, now)
	if now.Sub(rec.windowStart) >= g.window || rec.failures == 0 {
		rec.windowStart, rec.failures = now, 0
	}
	rec.failures++
	if rec.lastLog.IsZero() || now.Sub(rec.lastLog) >= g.logEvery {
		g.log.Warn("api authentication failed", "source", source, "reason", reason,
			"method", method, "path", path, "suppressed", rec.suppressed)
		rec.lastLog, rec.suppressed = now, 0
	} else {
		rec.suppressed++
	}
	if g.limit > 0 && rec.failures >= g.limit {
		rec.blockedUntil = now.Add(g.window)
		rec.windowStart, rec.failures = now, 0
		g.log.Warn("api source blocked after failed authentications", "source", key,
			"failures", g.limit, "within", g.window, "for", g.window)
	}
}

// recordLocked returns source's record, creating it if there is room, else
// the shared overflow record.
func (g *authGuard) recordLocked(source string, now time.Time) (string, *authRecord) {
	if rec, ok := g.sources[source]; ok {
		return source, rec
	}
	if len(g.sources) >= maxAuthSources && now.Sub(g.lastPrune) >= time.Second {
		g.pruneLocked(now)
	}
	if len(g.sources) >= maxAuthSources {
		source = overflowSource
	}
	rec, ok := g.sources[source]
	if !ok {
		rec = &authRecord{}
		g.sources[source] = rec
	}
	return source, rec
}

// pruneLocked forgets the sources with nothing left to remember: no
// failure in the window, no block, no log line in the interval.
func (g *authGuard) pruneLocked(now time.Time) {
	g.lastPrune = now
	for src, rec := range g.sources {
		if now.Sub(rec.windowStart) >= g.window && !now.Before(rec.blockedUntil) && now.Sub(rec.lastLog) >= g.logEvery {
			delete(g.sources, src)
		}
	}
}

// sourceOf returns the source a peer address is limited as: the IP
// address for IPv4, the /64 network for IPv6 (one host commonly holds a
// whole /64).
func sourceOf(remoteAddr string) string {
	host, _, err := net.SplitHostPort(remoteAddr)
	if err != nil {
		host = remoteAddr
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return host
	}
	ip = ip.WithZone("").Unmap()
	if ip.Is4() {
		return ip.String()
	}
	p, err := ip.Prefix(64)
	if err != nil {
		return ip.String()
	}
	return p.String()
}
