package ui

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/edgeset/edgeset/controller/access"
	"github.com/edgeset/edgeset/controller/api"
)

// sessionCookie names the cookie holding a session id.
const sessionCookie = "edgeset_session"

// csrfField names the hidden field of every POST form.
const csrfField = "csrf"

// session is one signed-in browser.
type session struct {
	id      string
	csrf    string // the token every action of the session must carry
	expires time.Time
	token   string      // the API token signed in with, server-side only
	user    access.User // its user, as of the request (authed)
}

// sessionTable holds the live sessions, at most max of them.
type sessionTable struct {
	max int
	ttl time.Duration
	now func() time.Time

	mu   sync.Mutex // guards byID
	byID map[string]session
}

func newSessionTable(max int, ttl time.Duration, now func() time.Time) *sessionTable {
	return &sessionTable{max: max, ttl: ttl, now: now, byID: map[string]session{}}
}

// open starts a session; if the table is full, the session closest to
// expiry ends first.
func (t *sessionTable) open(token string) session {
	s := session{id: randomToken(), csrf: randomToken(), expires: t.now().Add(t.ttl), token: token}
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.byID) >= t.max {
		t.pruneLocked()
	}
	if len(t.byID) >= t.max {
		var oldest session
		for _, o := range t.byID {
			if oldest.id == "" || o.expires.Before(oldest.expires) {
				oldest = o
			}
		}
		delete(t.byID, oldest.id)
	}
	t.byID[s.id] = s
	return s
}

// get returns the live session id names.
func (t *sessionTable) get(id string) (session, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	s, ok := t.byID[id]
	if ok && !t.now().Before(s.expires) {
		delete(t.byID, id)
		return session{}, false
	}
	return s, ok
}

// close ends a session.
func (t *sessionTable) close(id string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.byID, id)
}

// len returns how many sessions are held.
func (t *sessionTable) len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.byID)
}

// prune ends the expired sessions.
func (t *sessionTable) prune() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.pruneLocked()
}

func (t *sessionTable) pruneLocked() {
	now := t.now()
	for id, s := range t.byID {
		if !now.Before(s.expires) {
			delete(t.byID, id)
		}
	}
}

// randomToken returns 256 random bits, base64url.
func randomToken() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return base64.RawURLEncoding.EncodeToString(b)
}

// maxLoginSources bounds the sources a loginLimiter keeps records of;
// past it they share one record, so many addresses are limited as one.
const maxLoginSources = 4096

// loginLimiter blocks a source for window after failures failed sign-ins
// within window.
type loginLimiter struct {
	failures int
	window   time.Duration
	now      func() time.Time

	mu      sync.Mutex // guards sources
	sources map[string]*loginRecord
}

type loginRecord struct {
	start        time.Time // first failure of the window
	count        int
	blockedUntil time.Time
}

func newLoginLimiter(failures int, window time.Duration, now func() time.Time) *loginLimiter {
	return &loginLimiter{failures: failures, window: window, now: now, sources: map[string]*loginRecord{}}
}

// blocked returns how much longer source may not sign in.
func (l *loginLimiter) blocked(source string) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	rec := l.sources[l.keyLocked(source)]
	if rec == nil {
		return 0
	}
	return max(0, rec.blockedUntil.Sub(l.now()))
}

// failed records a failed sign-in of source and reports whether it
// blocked source (one log line per block, not per failure).
func (l *loginLimiter) failed(source string) (blocked bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	key := l.keyLocked(source)
	rec := l.sources[key]
	if rec == nil {
		rec = &loginRecord{}
		l.sources[key] = rec
	}
	if now.Sub(rec.start) >= l.window {
		rec.start, rec.count = now, 0
	}
	rec.count++
	if rec.count >= l.failures {
		rec.blockedUntil = now.Add(l.window)
		rec.start, rec.count = now, 0
		return true
	}
	return false
}

// keyLocked returns the record key of source: itself, or the shared
// overflow key once the table is full (after forgetting stale records).
func (l *loginLimiter) keyLocked(source string) string {
	if _, ok := l.sources[source]; ok || len(l.sources) < maxLoginSources {
		return source
	}
	now := l.now()
	for k, rec := range l.sources {
		if now.Sub(rec.start) >= l.window && !now.Before(rec.blockedUntil) {
			delete(l.sources, k)
		}
	}
	if len(l.sources) < maxLoginSources {
		return source
	}
	return "other sources"
}

// sourceOf is the source a request's sign-ins are limited as: its IP
// address, or its /64 for IPv6.
func sourceOf(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return host
	}
	ip = ip.WithZone("").Unmap()
	if ip.Is6() {
		if p, err := ip.Prefix(64); err == nil {
			return p.String()
		}
	}
	return ip.String()
}

func (d *Dashboard) loginForm(w http.ResponseWriter, r *http.Request) {
	if _, ok := d.signedIn(r); ok {
		http.Redirect(w, r, safeNext(r.URL.Query().Get("next")), http.StatusSeeOther)
		return
	}
	d.render(w, r, http.StatusOK, "login", session{}, loginView{Next: safeNext(r.URL.Query().Get("next"))})
}

type loginView struct {
	Next  string
	Error string
}

// login checks the posted token and opens a session.
func (d *Dashboard) login(w http.ResponseWriter, r *http.Request) {
	if !sameOrigin(r) {
		http.Error(w, "cross-origin sign-in refused", http.StatusForbidden)
		return
	}
	source := sourceOf(r)
	if wait := d.logins.blocked(source); wait > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(int(wait.Seconds())+1))
		d.render(w, r, http.StatusTooManyRequests, "login", session{},
			loginView{Error: "too many failed sign-ins from " + source + "; retry after " + wait.Round(time.Second).String()})
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
	token := r.PostFormValue("token")
	next := safeNext(r.PostFormValue("next"))
	u, ok := d.checkToken(token)
	if !ok {
		if d.logins.failed(source) {
			d.opts.Log.Warn("dashboard sign-ins blocked after failures", "source", source,
				"failures", d.opts.LoginFailures, "for", d.opts.LoginWindow)
		} else {
			d.opts.Log.Debug("dashboard sign-in failed", "source", source)
		}
		d.render(w, r, http.StatusUnauthorized, "login", session{}, loginView{Next: next, Error: "wrong token"})
		return
	}
	if d.opts.Audit != nil {
		e := api.EntryOf(r, u, "POST /ui/login")
		e.Path, e.Status = "/ui/login", http.StatusSeeOther
		if err := d.opts.Audit.Record(e); err != nil {
			d.opts.Log.Error("audit log unavailable: sign-in refused", "user", u.Name, "err", err)
			d.render(w, r, http.StatusServiceUnavailable, "login", session{}, loginView{Next: next, Error: "audit log unavailable; sign-in refused"})
			return
		}
	}
	s := d.sessions.open(token)
	http.SetCookie(w, &http.Cookie{
		Name: sessionCookie, Value: s.id, Path: "/ui/", HttpOnly: true, Secure: r.TLS != nil,
		SameSite: http.SameSiteStrictMode, Expires: s.expires,
	})
	http.Redirect(w, r, next, http.StatusSeeOther)
}

// checkToken returns the user a posted token signs in.
func (d *Dashboard) checkToken(token string) (access.User, bool) {
	if token == "" {
		return access.User{}, false
	}
	if d.opts.Users != nil {
		u, err := d.opts.Users.Authenticate(token)
		return u, err == nil
	}
	if subtle.ConstantTimeCompare([]byte(token), []byte(d.opts.Token)) != 1 {
		return access.User{}, false
	}
	return api.TokenAdmin(), true
}

// logout ends the session.
func (d *Dashboard) logout(w http.ResponseWriter, r *http.Request, s session) {
	d.sessions.close(s.id)
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: "", Path: "/ui/", HttpOnly: true, Secure: r.TLS != nil,
		SameSite: http.SameSiteStrictMode, MaxAge: -1})
	http.Redirect(w, r, "/ui/login", http.StatusSeeOther)
}

// maxFormBytes bounds a posted form.
const maxFormBytes = 64 << 10

// action serves a POST of a signed-in session carrying its CSRF token
// from a same-origin page, whose user holds the route's permission,
// with its audit entry written ahead (a denial is audited too); anything
// else is refused with 403 (503 when the entry cannot be written).
func (d *Dashboard) action(h func(http.ResponseWriter, *http.Request, session)) http.HandlerFunc {
	return d.signedInOnly(func(w http.ResponseWriter, r *http.Request, s session) {
		if !sameOrigin(r) {
			http.Error(w, "cross-origin request refused (Origin or Referer must be this dashboard)", http.StatusForbidden)
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
		got := r.PostFormValue(csrfField)
		if got == "" || subtle.ConstantTimeCompare([]byte(got), []byte(s.csrf)) != 1 {
			http.Error(w, "missing or wrong CSRF token (reload the page)", http.StatusForbidden)
			return
		}
		d.audited(w, r, s, func(w http.ResponseWriter, r *http.Request, s session) {
			if d.authorize(w, r, s) {
				h(w, r, s)
			}
		})
	})
}

// audited serves the action h, with its audit entry written ahead: an
// action whose entry cannot be written is refused with 503.
func (d *Dashboard) audited(w http.ResponseWriter, r *http.Request, s session, h func(http.ResponseWriter, *http.Request, session)) {
	if d.opts.Audit == nil {
		h(w, r, s)
		return
	}
	start := time.Now()
	seq, err := d.opts.Audit.Begin(r.Context(), api.EntryOf(r, s.user, r.Pattern))
	if err != nil {
		d.opts.Log.Error("audit log unavailable: dashboard action refused", "path", r.URL.Path, "user", s.user.Name, "err", err)
		http.Error(w, "audit log unavailable, action refused: "+err.Error(), http.StatusServiceUnavailable)
		return
	}
	rec := &statusWriter{ResponseWriter: w}
	h(rec, r, s)
	d.opts.Audit.Finish(seq, rec.code(), "", time.Since(start))
}

// statusWriter notes the status code an action answered.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(p)
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (w *statusWriter) code() int {
	if w.status == 0 {
		return http.StatusOK
	}
	return w.status
}

// safeNext returns next if it is a path of the dashboard, else /ui/: a
// sign-in never redirects elsewhere.
func safeNext(next string) string {
	if strings.HasPrefix(next, "/ui/") && !strings.HasPrefix(next, "//") && !strings.ContainsAny(next, "\\\r\n") {
		return next
	}
	return "/ui/"
}
