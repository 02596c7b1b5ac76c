package api

import (
	"crypto/subtle"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"strconv"
	"strings"

	"github.com/edgeset/edgeset/controller/access"
)

// Front is what every request meets before a route: the connection caps
// and timeouts of Limits, and bearer-token authentication with its
// failure throttling. A Server has one; an HA controller's standby, which
// has no Backend and forwards to the leader, uses one of its own
// (ServeHandler, Admit), so that only authenticated requests are
// forwarded.
type Front struct {
	token  string
	users  Authenticator // nil: token is an admin's
	defer_ bool          // Options.DeferUserTokens
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
	f := &Front{token: opts.Token, defer_: opts.DeferUserTokens, limits: opts.Limits, obs: opts.Observer, log: opts.Log,
		guard: newAuthGuard(opts.Limits, opts.Log)}
	if opts.Users != nil {
		f.users = opts.Users
	}
	return f
}

// Admit reports whether r may go on to a route. /healthz, /readyz and
// /metrics (GET or HEAD) need no token; a connection that has not
// authenticated is not kept alive after them, so it holds no slot of the
// unauthenticated cap for longer than one request. Every other request
// must carry the bearer token: if it does not, or its source failed too
// often, Admit answers it and closes the connection without reading the
// body.
func (f *Front) Admit(w http.ResponseWriter, r *http.Request) bool {
	_, ok := f.AdmitUser(w, r)
	return ok
}

// AdmitUser is Admit returning r with its user in the context (UserFrom);
// a public request, and a device's enrollment (POST EnrollPath, which
// authenticates with its code), carry none.
func (f *Front) AdmitUser(w http.ResponseWriter, r *http.Request) (*http.Request, bool) {
	if r.Method == http.MethodPost && r.URL.Path == EnrollPath {
		return r, f.AdmitDevice(w, r)
	}
	if public(r) {
		if !connAuthenticated(r) {
			w.Header().Set("Connection", "close")
		}
		return r, true
	}
	u, ok := f.authenticate(w, r)
	if !ok {
		return r, false
	}
	return r.WithContext(WithUser(r.Context(), u)), true
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

// authenticate returns r's user and whether r carries a user's token;
// if not, or if its source is blocked after failing too often, it
// answers r and closes the connection without reading the body.
func (f *Front) authenticate(w http.ResponseWriter, r *http.Request) (access.User, bool) {
	source := f.throttleSource(r)
	if d := f.guard.blocked(source); d > 0 {
		f.obs.AuthThrottled()
		retry := int64(math.Ceil(d.Seconds()))
		w.Header().Set("Retry-After", strconv.FormatInt(retry, 10))
		refuse(w, http.StatusTooManyRequests,
			fmt.Sprintf("too many failed authentications from %s; retry after %ds", source, retry))
		return access.User{}, false
	}
	u, reason, ok := f.checkToken(r)
	if !ok {
		f.obs.AuthFailed()
		f.guard.failed(source, reason, r.Method, r.URL.Path)
		w.Header().Set("WWW-Authenticate", `Bearer realm="edgeset"`)
		msg := "missing or wrong bearer token"
		if strings.Contains(reason, "expired") {
			msg = "bearer token expired"
		}
		refuse(w, http.StatusUnauthorized, msg)
		return access.User{}, false
	}
	MarkAuthenticated(r)
	return u, true
}

// checkToken returns the user of r's bearer token, and if there is none
// why.
func (f *Front) checkToken(r *http.Request) (u access.User, reason string, ok bool) {
	h := r.Header.Get("Authorization")
	if h == "" {
		return u, "no Authorization header", false
	}
	got, ok := strings.CutPrefix(h, "Bearer ")
	if !ok {
		return u, "Authorization is not a bearer token", false
	}
	if f.users != nil {
		u, err := f.users.Authenticate(got)
		if err != nil {
			return u, err.Error(), false
		}
		return u, "", true
	}
	if subtle.ConstantTimeCompare([]byte(got), []byte(f.token)) == 1 {
		return tokenAdmin(), "", true
	}
	if f.defer_ && strings.HasPrefix(got, access.TokenPrefix) {
		// Checked by the leader this request is forwarded to.
		return access.User{Name: "(unverified user token)"}, "", true
	}
	return u, "wrong bearer token", false
}
