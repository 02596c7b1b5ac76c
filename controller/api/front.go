package api

import (
	"crypto/subtle"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"strconv"
	"strings"
)

// Front is what every request meets before a route: the connection caps
// and timeouts of Limits, and bearer-token authentication with its
// failure throttling. A Server has one; an HA controller's standby, which
// has no Backend and forwards to the leader, uses one of its own
// (ServeHandler, Admit), so that only authenticated requests are
// forwarded.
type Front struct {
	token  string
	limits Limits
	obs    Observer
	log    *slog.Logger
	guard  *authGuard
}

// NewFront returns a Front with opts' token, limits, observer and log
// (Metrics is not used).
func NewFront(opts Options) *Front {
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	if opts.Observer == nil {
		opts.Observer = nopObserver{}
	}
	return &Front{token: opts.Token, limits: opts.Limits, obs: opts.Observer, log: opts.Log,
		guard: newAuthGuard(opts.Limits, opts.Log)}
}

// Admit reports whether r may go on to a route. /healthz, /readyz and
// /metrics (GET or HEAD) need no token; a connection that has not
// authenticated is not kept alive after them, so it holds no slot of the
// unauthenticated cap for longer than one request. Every other request
// must carry the bearer token: if it does not, or its source failed too
// often, Admit answers it and closes the connection without reading the
// body.
func (f *Front) Admit(w http.ResponseWriter, r *http.Request) bool {
	if r.Method == http.MethodPost && r.URL.Path == EnrollPath {
		return f.admitEnroll(w, r)
	}
	if public(r) {
		if !connAuthenticated(r) {
			w.Header().Set("Connection", "close")
		}
		return true
	}
	return f.authenticate(w, r)
}

// public reports whether r is for an endpoint served without a token.
func public(r *http.Request) bool {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		return false
	}
	switch r.URL.Path {
	case "/healthz", "/readyz", "/metrics":
		return true
	}
	return false
}

// authenticate reports whether r carries the token; if not, or if its
// source is blocked after failing too often, it answers r and closes the
// connection without reading the body.
func (f *Front) authenticate(w http.ResponseWriter, r *http.Request) bool {
	source := sourceOf(r.RemoteAddr)
	if d := f.guard.blocked(source); d > 0 {
		f.obs.AuthThrottled()
		retry := int64(math.Ceil(d.Seconds()))
		w.Header().Set("Retry-After", strconv.FormatInt(retry, 10))
		refuse(w, http.StatusTooManyRequests,
			fmt.Sprintf("too many failed authentications from %s; retry after %ds", source, retry))
		return false
	}
	if reason, ok := f.checkToken(r); !ok {
		f.obs.AuthFailed()
		f.guard.failed(source, reason, r.Method, r.URL.Path)
		w.Header().Set("WWW-Authenticate", `Bearer realm="edgeset"`)
		refuse(w, http.StatusUnauthorized, "missing or wrong bearer token")
		return false
	}
	MarkAuthenticated(r)
	return true
}

// checkToken reports whether r carries the bearer token, and if not why.
func (f *Front) checkToken(r *http.Request) (reason string, ok bool) {
	h := r.Header.Get("Authorization")
	if h == "" {
		return "no Authorization header", false
	}
	got, ok := strings.CutPrefix(h, "Bearer ")
	if !ok {
		return "Authorization is not a bearer token", false
	}
	if subtle.ConstantTimeCompare([]byte(got), []byte(f.token)) != 1 {
		return "wrong bearer token", false
	}
	return "", true
}
