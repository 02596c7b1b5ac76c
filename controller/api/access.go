package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/edgeset/edgeset/controller/access"
	"github.com/edgeset/edgeset/controller/audit"
	"github.com/edgeset/edgeset/schema"
)

// Authenticator finds the user a bearer token belongs to
// (*access.Users implements it).
type Authenticator interface {
	Authenticate(token string) (access.User, error)
}

// UserAdmin is an Authenticator that also manages users
// (GET/POST /users, DELETE /users/{name}).
type UserAdmin interface {
	Authenticator
	Create(s access.Spec, by string) (access.User, string, error)
	Revoke(name string) error
	List() []access.User
}

// Auditor writes the audit log ahead of the calls it records (see
// package audit): Begin stores an entry before the call runs, and a
// call whose entry cannot be stored is refused; Finish completes it.
type Auditor interface {
	Begin(ctx context.Context, e audit.Entry) (seq uint64, err error)
	Finish(seq uint64, status int, message string, d time.Duration)
	// Note records the call's own account of what it is about to do on
	// entry seq (audit.Entry.Detail); the call must not go on if it fails.
	Note(seq uint64, detail string) error
	// List returns the entries f selects (GET /audit).
	List(f audit.Filter) ([]audit.Entry, error)
}

// ErrConflict: the request conflicts with what exists (409).
var ErrConflict = errors.New("conflict")

type userKey struct{}

// WithUser returns ctx carrying u, the caller of a request.
func WithUser(ctx context.Context, u access.User) context.Context {
	return context.WithValue(ctx, userKey{}, u)
}

// UserFrom returns the caller ServeHTTP authenticated, if any.
func UserFrom(ctx context.Context) (access.User, bool) {
	u, ok := ctx.Value(userKey{}).(access.User)
	return u, ok
}

// tokenAdmin is the user of Options.Token when no Options.Users is set:
// the single admin token of a controller from before users (and of
// tests).
func tokenAdmin() access.User { return TokenAdmin() }

// TokenAdmin is the user a single shared token (no user table) acts as:
// an unscoped admin named access.BootstrapAdmin.
func TokenAdmin() access.User {
	return access.User{Name: access.BootstrapAdmin, Role: access.RoleAdmin}
}

// RouteMux is a ServeMux recording every pattern registered (the API's
// and the dashboard's), so that tests can check each has a row in
// access.Routes.
type RouteMux struct {
	*http.ServeMux
	mu       sync.Mutex
	patterns []string
}

func NewRouteMux() *RouteMux { return &RouteMux{ServeMux: http.NewServeMux()} }

func (m *RouteMux) Handle(pattern string, h http.Handler) {
	m.record(pattern)
	m.ServeMux.Handle(pattern, h)
}

func (m *RouteMux) HandleFunc(pattern string, h func(http.ResponseWriter, *http.Request)) {
	m.record(pattern)
	m.ServeMux.HandleFunc(pattern, h)
}

func (m *RouteMux) record(pattern string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.patterns = append(m.patterns, pattern)
}

// Patterns returns every pattern registered.
func (m *RouteMux) Patterns() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.patterns)
}

// Patterns returns every route pattern the server registered.
func (s *Server) Patterns() []string { return s.mux.Patterns() }

// serveAuthorized serves an authenticated request: it checks the
// route's permission (access.Routes) for r's user, answering 403 naming
// what is missing, writes the audit entry ahead of an audited call
// (answering 503 if it cannot), serves the route, and completes the
// entry.
func (s *Server) serveAuthorized(w http.ResponseWriter, r *http.Request) {
	_, pattern := s.mux.Handler(r)
	if pattern == "" {
		s.mux.ServeHTTP(w, r) // 404 or 405, as the mux answers them
		return
	}
	u, _ := UserFrom(r.Context())
	need := access.NeedOf(pattern, r.Method, r.URL.EscapedPath(), r.URL.Query())
	authErr := access.Authorize(u, need)
	if !need.Audit && authErr == nil {
		s.mux.ServeHTTP(w, r)
		return
	}
	if s.audit == nil {
		if authErr != nil {
			writeJSON(w, http.StatusForbidden, Error{Message: authErr.Error()})
			return
		}
		s.mux.ServeHTTP(w, r)
		return
	}
	start := time.Now()
	seq, err := s.audit.Begin(r.Context(), entryOf(r, u, pattern, audit.ViaAPI))
	if err != nil {
		s.log.Error("audit log unavailable: call refused", "method", r.Method, "path", r.URL.Path, "user", u.Name, "err", err)
		writeJSON(w, http.StatusServiceUnavailable, Error{Message: "audit log unavailable, call refused: " + err.Error()})
		return
	}
	rec := &statusRecorder{ResponseWriter: w}
	if authErr != nil {
		writeJSON(rec, http.StatusForbidden, Error{Message: authErr.Error()})
	} else {
		note := func(detail string) error { return s.audit.Note(seq, detail) }
		s.mux.ServeHTTP(rec, r.WithContext(context.WithValue(r.Context(), auditNoteKey{}, note)))
	}
	s.audit.Finish(seq, rec.code(), rec.message(), time.Since(start))
}

type auditNoteKey struct{}

// noteAudit records detail on the audit entry of the request of ctx,
// before the call acts on it (audit.Entry.Detail): an error means the
// call must not go on. A request without an entry (no audit log, or a
// route not audited) notes nothing.
func noteAudit(ctx context.Context, detail string) error {
	note, ok := ctx.Value(auditNoteKey{}).(func(string) error)
	if !ok {
		return nil
	}
	if err := note(detail); err != nil {
		return fmt.Errorf("%w: audit log unavailable, call refused: %v", ErrUnavailable, err)
	}
	return nil
}

// entryOf is the audit entry of r by u.
func entryOf(r *http.Request, u access.User, action, via string) audit.Entry {
	name := u.Name
	if name == "" && r.URL.Path == EnrollPath {
		name = "(enrollment code)"
	}
	return audit.Entry{
		User: name, Role: string(u.Role), Namespace: u.Namespace, Via: via,
		Method: r.Method, Path: r.URL.RequestURI(), Action: action,
		Remote: r.RemoteAddr, ForwardedFor: r.Header.Get("X-Forwarded-For"),
	}
}

// EntryOf is the audit entry of a dashboard action r by u (the
// dashboard writes its own entries through the same Auditor).
func EntryOf(r *http.Request, u access.User, action string) audit.Entry {
	return entryOf(r, u, action, audit.ViaDashboard)
}

// statusRecorder notes the status code written and the start of an
// error answer's body.
type statusRecorder struct {
	http.ResponseWriter
	status int
	body   []byte
}

func (r *statusRecorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *statusRecorder) Write(p []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	if r.status >= 400 && len(r.body) < audit.MaxMessage {
		r.body = append(r.body, p[:min(len(p), audit.MaxMessage-len(r.body))]...)
	}
	return r.ResponseWriter.Write(p)
}

// Unwrap lets http.ResponseController reach the connection (deadlines,
// flushes of log streams).
func (r *statusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

func (r *statusRecorder) Flush() {
	if f, ok := r.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (r *statusRecorder) code() int {
	if r.status == 0 {
		return http.StatusOK
	}
	return r.status
}

func (r *statusRecorder) message() string { return string(r.body) }

// authorizeApply checks that a namespace-scoped user applies only
// objects of its namespace: each manifest's namespace (default
// "default") must be the user's. Manifests that do not decode are left
// to the apply itself to refuse.
func authorizeApply(r *http.Request, source string, data []byte) error {
	u, ok := UserFrom(r.Context())
	if !ok || u.Namespace == "" {
		return nil
	}
	objs, _, _ := schema.Decode(source, data)
	var namespaces []string
	for _, o := range objs {
		namespaces = append(namespaces, objectNamespace(o))
	}
	return access.AuthorizeNamespaces(u, namespaces)
}

func objectNamespace(o schema.Object) string {
	var ns string
	switch {
	case o.DaemonSet != nil:
		ns = o.DaemonSet.Metadata.Namespace
	case o.ConfigMap != nil:
		ns = o.ConfigMap.Metadata.Namespace
	case o.Secret != nil:
		ns = o.Secret.Metadata.Namespace
	}
	if ns == "" {
		ns = schema.DefaultNamespace
	}
	return ns
}

// requesterOf names who made r, for events: the user and the peer.
func requesterOf(r *http.Request) string {
	who := "API client " + r.RemoteAddr
	if u, ok := UserFrom(r.Context()); ok {
		who = fmt.Sprintf("user %s from %s", u.Name, r.RemoteAddr)
	}
	if ua := r.UserAgent(); ua != "" {
		who += " (" + ua + ")"
	}
	return who
}
