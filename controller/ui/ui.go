// Package ui is the controller's web dashboard: server-rendered pages under
// /ui/ over the same Backend calls as the HTTP API, live counts, events and
// logs over Server-Sent Events, and plots drawn server-side as SVG. Every
// asset is embedded; a page makes no request outside the controller
// (Content-Security-Policy default-src 'self').
//
// Sign-in checks the API user's token posted to /ui/login (in constant
// time) and opens a server-side session acting as that user; the browser
// holds only a random session id in an HttpOnly, SameSite=Strict cookie.
// Every action is a POST carrying the session's CSRF token and a
// same-origin Origin or Referer, allowed by the user's role
// (access.Routes) and audited.
package ui

import (
	"context"
	"embed"
	"html/template"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/edgeset/edgeset/controller/access"
	"github.com/edgeset/edgeset/controller/api"
	"github.com/edgeset/edgeset/controller/audit"
)

// Backend is what the dashboard reads and acts through: the subset of
// api.Backend it needs. *controller.Controller implements it.
type Backend interface {
	ListDaemonSets(ctx context.Context) ([]api.DaemonSet, error)
	GetDaemonSet(ctx context.Context, key string) (api.DaemonSet, error)
	ListNodes(ctx context.Context) ([]api.Node, error)
	GetNode(ctx context.Context, name string) (api.Node, error)
	UpdateNode(ctx context.Context, name string, patch api.NodePatch) (api.Node, error)
	Rollout(ctx context.Context, key string, req api.RolloutRequest) (api.DaemonSet, error)
	RolloutHistory(ctx context.Context, key string) ([]api.Revision, error)
	Events(ctx context.Context, f api.EventFilter) ([]api.Event, error)
	Logs(ctx context.Context, req api.LogsRequest) (io.ReadCloser, error)
	Version(ctx context.Context) api.VersionInfo
}

// Authenticator finds the user a token belongs to (*access.Users).
type Authenticator interface {
	Authenticate(token string) (access.User, error)
}

// Auditor writes audit entries (*audit.Log).
type Auditor interface {
	Begin(ctx context.Context, e audit.Entry) (uint64, error)
	Finish(seq uint64, status int, message string, d time.Duration)
	Record(e audit.Entry) error
}

// DefaultSiteLabel is the node label the dashboard groups nodes by site
// with: the label the project's simulated fleets and examples use.
const DefaultSiteLabel = "site"

// Options configure a Dashboard. Zero fields take the defaults documented
// on each (applied in withDefaults).
type Options struct {
	// Token is the API token the sign-in form is compared with when
	// Users is nil (it then signs in an admin).
	Token string
	// Users (may be nil) authenticates the token posted to the sign-in
	// form as an API user: the session then acts with that user's role,
	// and ends as soon as the user is revoked or expires.
	Users Authenticator
	// Audit (may be nil) records every action and sign-in (see package
	// audit): an action whose entry cannot be written is refused.
	Audit Auditor
	// SiteLabel is the node label that names a node's site; default
	// DefaultSiteLabel.
	SiteLabel string
	// SessionTTL is how long a session lasts after sign-in; default 12 h.
	SessionTTL time.Duration
	// MaxSessions bounds the session table; past it, a sign-in ends the
	// session closest to expiry. Default 1024.
	MaxSessions int
	// MaxStreams bounds the open SSE streams (live updates and log
	// follows); past it a stream is answered 503. Default 32.
	MaxStreams int
	// Refresh is how often the live counts and events are read from the
	// Backend and pushed to the streams; default 2 s.
	Refresh time.Duration
	// NodeCacheAge is how long the node table reuses one read of the
	// fleet's nodes and its sorted orders; default 2 s. The dashboard's
	// own node actions drop it.
	NodeCacheAge time.Duration
	// Heartbeat is how often an idle stream gets a comment line; default
	// 15 s.
	Heartbeat time.Duration
	// SampleInterval is how often each daemonset's rollout progress is
	// sampled for its plot; default 10 s. HistoryPoints samples are kept
	// per daemonset (default 360: an hour), for at most MaxTracked
	// daemonsets (default 256).
	SampleInterval time.Duration
	HistoryPoints  int
	MaxTracked     int
	// LoginFailures failed sign-ins from one source within LoginWindow
	// block it for LoginWindow; defaults 5 and 1 min.
	LoginFailures int
	LoginWindow   time.Duration
	// Log receives the dashboard's log lines; default discard.
	Log *slog.Logger
	// Now is the dashboard's clock; default time.Now.
	Now func() time.Time
}

func (o Options) withDefaults() Options {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	defInt := func(n *int, v int) {
		if *n <= 0 {
			*n = v
		}
	}
	if o.SiteLabel == "" {
		o.SiteLabel = DefaultSiteLabel
	}
	def(&o.SessionTTL, 12*time.Hour)
	def(&o.Refresh, 2*time.Second)
	def(&o.Heartbeat, 15*time.Second)
	def(&o.NodeCacheAge, 2*time.Second)
	def(&o.SampleInterval, 10*time.Second)
	def(&o.LoginWindow, time.Minute)
	defInt(&o.MaxSessions, 1024)
	defInt(&o.MaxStreams, 32)
	defInt(&o.HistoryPoints, 360)
	defInt(&o.MaxTracked, 256)
	defInt(&o.LoginFailures, 5)
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return o
}

//go:embed templates/*.html
var templateFS embed.FS

//go:embed assets
var assetFS embed.FS

// Dashboard serves the web dashboard. Create it with New, mount it as an
// http.Handler, and run it with Run, which feeds the live streams and the
// progress history.
type Dashboard struct {
	b        Backend
	opts     Options
	mux      *api.RouteMux
	pages    map[string]*template.Template
	sessions *sessionTable
	logins   *loginLimiter
	history  *progressHistory
	live     *liveFeed
	nodes    *nodeIndex
	streams  chan struct{} // one token per open stream

	// stopped ends when Run returns: every open stream then ends. It is
	// the dashboard's lifetime, not a request's.
	stopped context.Context
	stop    context.CancelFunc
}

// New returns a Dashboard over b.
func New(b Backend, opts Options) *Dashboard {
	opts = opts.withDefaults()
	d := &Dashboard{
		b: b, opts: opts, mux: api.NewRouteMux(), pages: parsePages(),
		sessions: newSessionTable(opts.MaxSessions, opts.SessionTTL, opts.Now),
		logins:   newLoginLimiter(opts.LoginFailures, opts.LoginWindow, opts.Now),
		history:  newProgressHistory(opts.HistoryPoints, opts.MaxTracked),
		live:     newLiveFeed(),
		nodes:    newNodeIndex(opts.NodeCacheAge, opts.Now),
		streams:  make(chan struct{}, opts.MaxStreams),
	}
	d.stopped, d.stop = context.WithCancel(context.Background())
	d.routes()
	return d
}

// Run feeds the live streams every Refresh and samples rollout progress
// every SampleInterval until ctx ends; then it ends every open stream and
// returns nil.
func (d *Dashboard) Run(ctx context.Context) error {
	defer d.stop()
	refresh := time.NewTicker(d.opts.Refresh)
	defer refresh.Stop()
	var lastSample time.Time
	for {
		now := d.opts.Now()
		sample := now.Sub(lastSample) >= d.opts.SampleInterval
		if sample {
			lastSample = now
		}
		d.refresh(ctx, now, sample)
		select {
		case <-ctx.Done():
			return nil
		case <-refresh.C:
		case <-d.live.kick: // a stream opened: give it fresh counts
		case <-d.nodes.stale: // a page was served an old node snapshot
			if _, err := d.nodes.fresh(ctx, d.b); err != nil {
				d.opts.Log.Debug("dashboard: list nodes", "err", err)
			}
		}
	}
}

// refresh reads what the streams push and, when sample is set, records a
// progress sample of every daemonset.
func (d *Dashboard) refresh(ctx context.Context, now time.Time, sample bool) {
	d.sessions.prune()
	dss, err := d.b.ListDaemonSets(ctx)
	if err != nil {
		d.opts.Log.Debug("dashboard: list daemonsets", "err", err)
		return
	}
	if sample {
		d.history.record(now, dss)
	}
	if d.live.watchers() == 0 {
		return
	}
	snap, err := d.nodes.fresh(ctx, d.b)
	if err != nil {
		return
	}
	evs, err := d.b.Events(ctx, api.EventFilter{SinceSeq: d.live.lastSeq(), Limit: liveEventBacklog})
	if err != nil {
		return
	}
	d.live.publish(fleetCounts(snap.nodes, dss, d.opts.SiteLabel), evs)
}

// ServeHTTP implements http.Handler: GET / redirects to /ui/, and every
// page but the sign-in form and the assets needs a session.
func (d *Dashboard) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	setSecurityHeaders(w)
	if r.URL.Path == "/" {
		http.Redirect(w, r, "/ui/", http.StatusFound)
		return
	}
	d.mux.ServeHTTP(w, r)
}

// contentSecurityPolicy lets a page load only the controller's own
// assets: no inline script or style, no frame, no form posted elsewhere.
const contentSecurityPolicy = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; frame-ancestors 'none'; form-action 'self'; base-uri 'none'; object-src 'none'"

func setSecurityHeaders(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Content-Security-Policy", contentSecurityPolicy)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "same-origin")
}

func (d *Dashboard) routes() {
	assets, _ := fs.Sub(assetFS, "assets")
	d.mux.Handle("GET /ui/assets/", http.StripPrefix("/ui/assets/", http.FileServerFS(assets)))
	d.mux.HandleFunc("GET /ui/login", d.loginForm)
	d.mux.HandleFunc("POST /ui/login", d.login)
	d.mux.HandleFunc("POST /ui/logout", d.action(d.logout))
	d.mux.HandleFunc("GET /ui/{$}", d.page(d.fleetPage))
	d.mux.HandleFunc("GET /ui", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/ui/", http.StatusFound) })
	d.mux.HandleFunc("GET /ui/nodes", d.page(d.nodesPage))
	d.mux.HandleFunc("GET /ui/nodes/{name}", d.page(d.nodePage))
	d.mux.HandleFunc("POST /ui/nodes/{name}/{action}", d.action(d.nodeAction))
	d.mux.HandleFunc("GET /ui/nodes/{name}/logs", d.authed(d.logStream))
	d.mux.HandleFunc("GET /ui/daemonsets", d.page(d.daemonSetsPage))
	d.mux.HandleFunc("GET /ui/daemonsets/{namespace}/{name}", d.page(d.daemonSetPage))
	d.mux.HandleFunc("POST /ui/daemonsets/{namespace}/{name}/rollout", d.action(d.rolloutAction))
	d.mux.HandleFunc("GET /ui/events", d.page(d.eventsPage))
	d.mux.HandleFunc("GET /ui/stream", d.authed(d.liveStream))
}

// signedIn returns r's session, if it carries a live one.
func (d *Dashboard) signedIn(r *http.Request) (session, bool) {
	c, err := r.Cookie(sessionCookie)
	if err != nil {
		return session{}, false
	}
	return d.sessions.get(c.Value)
}

// Patterns returns every route pattern the dashboard registered.
func (d *Dashboard) Patterns() []string { return d.mux.Patterns() }

// authed serves h only to a signed-in request whose user holds what the
// route needs (access.Routes, by r.Pattern); others are sent to the
// sign-in form (a page) or answered 401 (a stream), or 403 naming the
// missing permission.
func (d *Dashboard) authed(h func(http.ResponseWriter, *http.Request, session)) http.HandlerFunc {
	return d.signedInOnly(func(w http.ResponseWriter, r *http.Request, s session) {
		if d.authorize(w, r, s) {
			h(w, r, s)
		}
	})
}

// signedInOnly serves h only to a signed-in request, its session's user
// in r's context, without checking the route's permission (action checks
// it after the CSRF token).
func (d *Dashboard) signedInOnly(h func(http.ResponseWriter, *http.Request, session)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		s, ok := d.signedIn(r)
		if ok {
			s, ok = d.currentUser(s)
		}
		if !ok {
			if r.Header.Get("Accept") == "text/event-stream" {
				http.Error(w, "sign in at /ui/login", http.StatusUnauthorized)
				return
			}
			http.Redirect(w, r, "/ui/login?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
			return
		}
		api.MarkAuthenticated(r)
		h(w, r.WithContext(api.WithUser(r.Context(), s.user)), s)
	}
}

// authorize reports whether s's user holds what r's route needs
// (access.Routes, by r.Pattern); if not it answers 403 naming what is
// missing.
func (d *Dashboard) authorize(w http.ResponseWriter, r *http.Request, s session) bool {
	need := access.NeedOf(r.Pattern, r.Method, r.URL.EscapedPath(), r.URL.Query())
	err := access.Authorize(s.user, need)
	switch {
	case err == nil:
		return true
	case r.Header.Get("Accept") == "text/event-stream":
		http.Error(w, err.Error(), http.StatusForbidden)
	default:
		d.renderError(w, r, s, err)
	}
	return false
}

// currentUser refreshes s's user from its token: a revoked or expired
// user's session ends at its next request.
func (d *Dashboard) currentUser(s session) (session, bool) {
	if d.opts.Users == nil {
		s.user = api.TokenAdmin()
		return s, true
	}
	u, err := d.opts.Users.Authenticate(s.token)
	if err != nil {
		d.sessions.close(s.id)
		return session{}, false
	}
	s.user = u
	return s, true
}

// sameOrigin reports whether a state-changing request comes from a page
// of this dashboard: its Origin, or failing that its Referer, names the
// host it was sent to. A request with neither is refused.
func sameOrigin(r *http.Request) bool {
	want := originOf(r)
	if o := r.Header.Get("Origin"); o != "" {
		return o == want
	}
	ref := r.Header.Get("Referer")
	return ref == want || strings.HasPrefix(ref, want+"/")
}

// originOf is the origin r was sent to: scheme://host.
func originOf(r *http.Request) string {
	if r.TLS != nil {
		return "https://" + r.Host
	}
	return "http://" + r.Host
}
