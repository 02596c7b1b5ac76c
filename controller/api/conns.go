package api

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"sync"

	"github.com/edgeset/edgeset/internal/loglimit"
)

// connLimiter admits connections within Limits.MaxUnauthenticatedConns
// and Limits.MaxConnsPerSource, and tracks which have authenticated.
// Refusals and failed accepts are reported to the Observer and each logged
// at most once per Limits.AuthLogInterval, the line counting those not
// logged.
type connLimiter struct {
	maxUnauth, maxPerSource int // 0: no cap
	obs                     Observer
	log                     *slog.Logger
	logs                    *loglimit.Limiter // keys logRefused, logAccept

	mu        sync.Mutex // guards the fields below and every trackedConn's state
	unauth    int
	perSource map[string]int // open connections by source; no zero entries
}

// Keys of connLimiter.logs: one line per interval for all refusals, one
// for all failed accepts.
const (
	logRefused = "refused"
	logAccept  = "accept"
)

// trackedConn is an admitted connection; closing it frees its place.
type trackedConn struct {
	net.Conn
	l      *connLimiter
	source string
	// authed and closed are guarded by l.mu.
	authed, closed bool
}

func newConnLimiter(l Limits, obs Observer, log *slog.Logger) *connLimiter {
	return &connLimiter{maxUnauth: l.MaxUnauthenticatedConns, maxPerSource: l.MaxConnsPerSource,
		obs: obs, log: log, logs: loglimit.New(l.AuthLogInterval, 2, nil), perSource: map[string]int{}}
}

// admit returns c tracked, or nil if a cap is reached (the refusal is
// counted).
func (l *connLimiter) admit(c net.Conn) *trackedConn {
	source := sourceOf(c.RemoteAddr().String())
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case l.maxPerSource > 0 && l.perSource[source] >= l.maxPerSource:
		l.refusedLocked(source, ConnRefusedPerSource)
		return nil
	case l.maxUnauth > 0 && l.unauth >= l.maxUnauth:
		l.refusedLocked(source, ConnRefusedUnauthenticated)
		return nil
	}
	l.perSource[source]++
	l.unauth++
	return &trackedConn{Conn: c, l: l, source: source}
}

// refusedLocked reports and, unless a refusal was logged less than an
// interval ago, logs the refusal of a connection of source.
func (l *connLimiter) refusedLocked(source, reason string) {
	l.obs.ConnRefused(reason)
	if suppressed, ok := l.logs.Allow(logRefused); ok {
		l.log.Warn("api connection refused", "source", source, "reason", reason,
			"unauthenticated", l.unauth, "fromSource", l.perSource[source], "suppressed", suppressed)
	}
}

// acceptFailed reports an error of the listener's Accept (EMFILE when the
// process is out of descriptors) and logs it at most once per interval,
// the line counting those not logged. net/http retries such errors and
// logs them only to its error log, which goes to the debug level.
func (l *connLimiter) acceptFailed(err error) {
	l.obs.AcceptFailed()
	if suppressed, ok := l.logs.Allow(logAccept); ok {
		l.log.Error("api cannot accept connections (retrying)", "err", err, "suppressed", suppressed)
	}
}

// authenticated marks c as having carried an authorised request.
func (c *trackedConn) authenticated() {
	c.l.mu.Lock()
	defer c.l.mu.Unlock()
	if c.authed || c.closed {
		return
	}
	c.authed = true
	c.l.unauth--
}

// Close closes the connection and frees its place; safe to call twice.
func (c *trackedConn) Close() error {
	c.l.mu.Lock()
	if !c.closed {
		c.closed = true
		if !c.authed {
			c.l.unauth--
		}
		if c.l.perSource[c.source]--; c.l.perSource[c.source] <= 0 {
			delete(c.l.perSource, c.source)
		}
	}
	c.l.mu.Unlock()
	return c.Conn.Close()
}

// limitedListener closes the connections its connLimiter refuses as soon
// as they are accepted.
type limitedListener struct {
	net.Listener
	l *connLimiter
}

func (ll *limitedListener) Accept() (net.Conn, error) {
	for {
		c, err := ll.Listener.Accept()
		if err != nil {
			if !errors.Is(err, net.ErrClosed) {
				ll.l.acceptFailed(err)
			}
			return nil, err // net/http retries temporary errors with a back-off
		}
		if tc := ll.l.admit(c); tc != nil {
			return tc, nil
		}
		_ = c.Close()
	}
}

type connKey struct{}

// withConn is the http.Server's ConnContext: it keeps the trackedConn
// under a connection (TLS or not) in the context of its requests.
func withConn(ctx context.Context, c net.Conn) context.Context {
	for {
		if tc, ok := c.(*trackedConn); ok {
			return context.WithValue(ctx, connKey{}, tc)
		}
		u, ok := c.(interface{ NetConn() net.Conn })
		if !ok {
			return ctx
		}
		c = u.NetConn()
	}
}

// connAuthenticated reports whether r's connection has authenticated; a
// connection the server does not track (httptest) counts as such.
func connAuthenticated(r *http.Request) bool {
	tc, ok := r.Context().Value(connKey{}).(*trackedConn)
	if !ok {
		return true
	}
	tc.l.mu.Lock()
	defer tc.l.mu.Unlock()
	return tc.authed
}

// MarkAuthenticated marks r's connection as authenticated, so it no
// longer counts against Limits.MaxUnauthenticatedConns. A handler mounted
// before the bearer-token check (Options.UI) calls it once it has
// authenticated r its own way (a dashboard session).
func MarkAuthenticated(r *http.Request) {
	if tc, ok := r.Context().Value(connKey{}).(*trackedConn); ok {
		tc.authenticated()
	}
}
