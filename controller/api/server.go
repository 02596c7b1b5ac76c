package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/edgeset/edgeset/controller/access"
	"github.com/edgeset/edgeset/schema"
)

// Errors a Backend returns; the server maps them to HTTP status codes.
var (
	// ErrNotFound: the named object does not exist (404).
	ErrNotFound = errors.New("not found")
	// ErrInvalid: the request is malformed (400); wrap it with the reason.
	ErrInvalid = errors.New("invalid request")
	// ErrUnavailable: the controller cannot serve the request now (503).
	ErrUnavailable = errors.New("unavailable")
	// ErrTimeout: a node did not answer in time (504).
	ErrTimeout = errors.New("timed out")
	// ErrRequestTimeout: the client did not send its request in time (408).
	ErrRequestTimeout = errors.New("request timeout")
)

// MaxRequestBytes bounds a request body (an apply of many manifests).
const MaxRequestBytes = 8 << 20

// Backend is what the API serves. The controller implements it.
// A *schema.ValidationError from ApplyManifests is answered 422 with every
// field problem.
type Backend interface {
	ApplyManifests(ctx context.Context, source string, data []byte, opts ApplyOptions) ([]ApplyResult, error)
	ListDaemonSets(ctx context.Context) ([]DaemonSet, error)
	GetDaemonSet(ctx context.Context, key string) (DaemonSet, error)
	DeleteDaemonSet(ctx context.Context, key string, orphan bool) error
	ListNodes(ctx context.Context) ([]Node, error)
	GetNode(ctx context.Context, name string) (Node, error)
	UpdateNode(ctx context.Context, name string, patch NodePatch) (Node, error)
	DeleteNode(ctx context.Context, name string) error
	ListInstances(ctx context.Context) ([]Instance, error)
	// DeleteInstance removes a daemonset's instance from a node; under
	// OnDelete the node then moves to the current revision.
	DeleteInstance(ctx context.Context, key, node string) error
	Rollout(ctx context.Context, key string, req RolloutRequest) (DaemonSet, error)
	// ForceRollout resumes a rollout and overrides the stale update locks
	// of its nodes (of node alone, when not empty).
	ForceRollout(ctx context.Context, key, node string) (DaemonSet, error)
	RolloutHistory(ctx context.Context, key string) ([]Revision, error)
	Events(ctx context.Context, f EventFilter) ([]Event, error)
	Version(ctx context.Context) VersionInfo
	// Logs streams one container's log from a node (see LogsRequest).
	Logs(ctx context.Context, req LogsRequest) (io.ReadCloser, error)
	// Ready returns nil when the controller serves fully, else why not.
	Ready(ctx context.Context) error
	// Sources lists the files of the watched manifests directory.
	Sources(ctx context.Context) ([]Source, error)
	ConfigBackend
}

// ReadyNoter is implemented by a Backend whose /readyz answer carries
// notes that do not make it unready (an invalid manifest file).
type ReadyNoter interface {
	ReadyNotes(ctx context.Context) []string
}

// Server serves the API over HTTP.
type Server struct {
	*Front  // token, limits, authentication (front.go)
	backend Backend
	metrics http.Handler
	mux     *RouteMux
	nodeMux *http.ServeMux // node image fetches (images.go)
	ui      http.Handler   // Options.UI; nil for none
	users   UserAdmin      // Options.Users; nil: the single Options.Token
	audit   Auditor        // Options.Audit; nil: no audit log
}

// NewServer returns a Server answering requests that carry token as a
// bearer token, without limits; metrics (may be nil) serves /metrics
// without authentication, as do /healthz and /readyz.
func NewServer(b Backend, token string, metrics http.Handler, log *slog.Logger) *Server {
	return New(b, Options{Token: token, Metrics: metrics, Log: log})
}

// New returns a Server as opts describe.
func New(b Backend, opts Options) *Server {
	s := &Server{Front: NewFront(opts), backend: b, metrics: opts.Metrics, mux: NewRouteMux(), ui: opts.UI,
		users: opts.Users, audit: opts.Audit}
	s.routes()
	return s
}

// ServeHTTP implements http.Handler. Every request but those for
// /healthz, /readyz and /metrics is authenticated from its headers before
// any route sees it, so no body of an unauthenticated request is read.
// A connection that has not authenticated is not kept alive after a
// request for those, so it holds no slot of the unauthenticated cap for
// longer than one request.
//
// An authenticated request is then authorized (access.Routes) and, if
// it mutates, audited (serveAuthorized).
//
// With Options.UI, GET / and everything under /ui/ go to it before any
// bearer-token check: the dashboard authenticates with its own session.
// Nodes fetching images (NodeImagesPrefix) authenticate with their own
// credential instead of the bearer token (images.go).
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if s.ui != nil && IsUIPath(r.URL.Path) {
		s.ui.ServeHTTP(w, r)
		return
	}
	if s.serveNode(w, r) {
		return
	}
	if r, ok := s.AdmitUser(w, r); ok {
		s.serveAuthorized(w, r)
	}
}

// IsUIPath reports whether path is the dashboard's (Options.UI): GET /
// and everything under /ui/.
func IsUIPath(path string) bool {
	return path == "/" || path == "/ui" || strings.HasPrefix(path, "/ui/")
}

func (s *Server) routes() {
	s.mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok\n") })
	s.mux.HandleFunc("GET /readyz", s.readyz)
	if s.metrics != nil {
		s.mux.Handle("GET /metrics", s.metrics)
	}
	p := "/api/" + Version
	s.handle("GET "+p+"/version", s.version)
	s.handle("POST "+p+"/apply", s.apply)
	s.handle("GET "+p+"/daemonsets", s.listDaemonSets)
	s.handle("GET "+p+"/daemonsets/{namespace}/{name}", s.getDaemonSet)
	s.handle("DELETE "+p+"/daemonsets/{namespace}/{name}", s.deleteDaemonSet)
	s.handle("POST "+p+"/daemonsets/{namespace}/{name}/rollout", s.rollout)
	s.handle("POST "+p+"/daemonsets/{namespace}/{name}/rollout/force", s.forceRollout)
	s.handle("GET "+p+"/daemonsets/{namespace}/{name}/revisions", s.revisions)
	s.handle("DELETE "+p+"/daemonsets/{namespace}/{name}/instances/{node}", s.deleteInstance)
	s.mux.HandleFunc("GET "+p+"/daemonsets/{namespace}/{name}/logs", s.logs)
	s.mux.HandleFunc("POST "+p+"/daemonsets/{namespace}/{name}/exec", s.exec)
	s.handle("POST "+p+"/daemonsets/{namespace}/{name}/exec/{session}/input", s.execInput)
	s.handle("GET "+p+"/nodes", s.listNodes)
	s.handle("GET "+p+"/nodes/{name}", s.getNode)
	s.handle("PATCH "+p+"/nodes/{name}", s.patchNode)
	s.handle("DELETE "+p+"/nodes/{name}", s.deleteNode)
	s.handle("POST "+p+"/nodes/{name}/token", s.mintNodeToken)
	s.handle("GET "+p+"/instances", s.listInstances)
	s.handle("GET "+p+"/events", s.events)
	s.handle("GET "+p+"/sources", s.sources)
	s.mux.HandleFunc("GET "+p+"/backup", s.backup)
	s.configRoutes(p)
	s.accessRoutes(p)
	s.enrollRoutes(p)
	s.signingRoutes(p) // signing.go
	s.imageRoutes(p)
	s.nodeKeyRoutes(p) // nodekeys.go, after imageRoutes makes the node mux
}

// handle registers an endpoint answering JSON (authenticated in
// ServeHTTP). The write timeout starts when the answer is ready, so it
// bounds the client taking it, not the controller computing it.
func (s *Server) handle(pattern string, h func(http.ResponseWriter, *http.Request) (any, error)) {
	s.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		v, err := h(w, r)
		s.startWriteTimeout(w)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		writeJSON(w, http.StatusOK, v)
	})
}

// startWriteTimeout gives the response about to be written the whole
// write timeout.
func (s *Server) startWriteTimeout(w http.ResponseWriter) {
	if s.limits.WriteTimeout > 0 {
		_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(s.limits.WriteTimeout))
	}
}

// refuse answers a request with code and msg and closes the connection
// without reading what remains of the body: net/http would otherwise read
// up to 256 KiB of it, however slowly it comes, before answering or
// closing.
func refuse(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Connection", "close")
	writeJSON(w, code, Error{Message: msg})
	_ = http.NewResponseController(w).SetReadDeadline(time.Now())
}

func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	if err := s.backend.Ready(r.Context()); err != nil {
		http.Error(w, "not ready: "+err.Error(), http.StatusServiceUnavailable)
		return
	}
	io.WriteString(w, "ok\n")
	if n, ok := s.backend.(ReadyNoter); ok {
		for _, note := range n.ReadyNotes(r.Context()) {
			io.WriteString(w, note+"\n")
		}
	}
}

func (s *Server) version(_ http.ResponseWriter, r *http.Request) (any, error) {
	return s.backend.Version(r.Context()), nil
}

func (s *Server) apply(_ http.ResponseWriter, r *http.Request) (any, error) {
	dryRun, err := boolQuery(r, "dryRun")
	if err != nil {
		return nil, err
	}
	data, err := readBody(r)
	if err != nil {
		return nil, err
	}
	source := r.URL.Query().Get("source")
	if source == "" {
		source = "request"
	}
	if err := authorizeApply(r, source, data); err != nil {
		return nil, err
	}
	// source names the file in error messages; owner is recorded on the
	// daemonsets applied (ApplyOptions.Source).
	opts := ApplyOptions{DryRun: dryRun, Source: r.URL.Query().Get("owner")}
	return s.backend.ApplyManifests(r.Context(), source, data, opts)
}

func (s *Server) sources(_ http.ResponseWriter, r *http.Request) (any, error) {
	return s.backend.Sources(r.Context())
}

func (s *Server) listDaemonSets(_ http.ResponseWriter, r *http.Request) (any, error) {
	return s.backend.ListDaemonSets(r.Context())
}

func (s *Server) getDaemonSet(_ http.ResponseWriter, r *http.Request) (any, error) {
	return s.backend.GetDaemonSet(r.Context(), r.PathValue("namespace")+"/"+r.PathValue("name"))
}

func (s *Server) deleteDaemonSet(_ http.ResponseWriter, r *http.Request) (any, error) {
	orphan, err := boolQuery(r, "orphan")
	if err != nil {
		return nil, err
	}
	key := r.PathValue("namespace") + "/" + r.PathValue("name")
	return map[string]string{"deleted": key}, s.backend.DeleteDaemonSet(r.Context(), key, orphan)
}

func dsKey(r *http.Request) string { return r.PathValue("namespace") + "/" + r.PathValue("name") }

func (s *Server) rollout(_ http.ResponseWriter, r *http.Request) (any, error) {
	var req RolloutRequest
	if err := decodeBody(r, &req); err != nil {
		return nil, err
	}
	return s.backend.Rollout(r.Context(), dsKey(r), req)
}

// forceRollout is `rollout resume --force [--node NODE]`: the node, if
// any, is the query's node parameter, so that the audit log's path says
// which.
func (s *Server) forceRollout(_ http.ResponseWriter, r *http.Request) (any, error) {
	return s.backend.ForceRollout(r.Context(), dsKey(r), r.URL.Query().Get("node"))
}

func (s *Server) revisions(_ http.ResponseWriter, r *http.Request) (any, error) {
	return s.backend.RolloutHistory(r.Context(), dsKey(r))
}

func (s *Server) deleteInstance(_ http.ResponseWriter, r *http.Request) (any, error) {
	node := r.PathValue("node")
	return map[string]string{"deleted": dsKey(r) + "@" + node}, s.backend.DeleteInstance(r.Context(), dsKey(r), node)
}

func (s *Server) listNodes(_ http.ResponseWriter, r *http.Request) (any, error) {
	return s.backend.ListNodes(r.Context())
}

func (s *Server) getNode(_ http.ResponseWriter, r *http.Request) (any, error) {
	return s.backend.GetNode(r.Context(), r.PathValue("name"))
}

func (s *Server) patchNode(_ http.ResponseWriter, r *http.Request) (any, error) {
	var patch NodePatch
	if err := decodeBody(r, &patch); err != nil {
		return nil, err
	}
	return s.backend.UpdateNode(r.Context(), r.PathValue("name"), patch)
}

// decodeBody decodes a JSON request body strictly: it must be one JSON
// object, with nothing after it but white space, and an unknown field is
// an error naming it.
func decodeBody(r *http.Request, v any) error {
	data, err := readBody(r)
	if err != nil {
		return err
	}
	data = bytes.TrimSpace(data)
	if len(data) == 0 {
		return fmt.Errorf("%w: request body is empty; want a JSON object", ErrInvalid)
	}
	if data[0] != '{' {
		return fmt.Errorf("%w: request body: want a JSON object", ErrInvalid)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("%w: request body: %v", ErrInvalid, err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return fmt.Errorf("%w: request body: unexpected data after the JSON object at byte %d", ErrInvalid, dec.InputOffset())
	}
	if field := duplicateField(data); field != "" {
		return fmt.Errorf("%w: request body: duplicate field %q", ErrInvalid, field)
	}
	return nil
}

// duplicateField returns the path ("labels.a", "addTaints[0].key") of the
// first object member data, one valid JSON value, gives twice, "" if none
// is. encoding/json keeps the last of them (merging objects), so a body
// such as {"labels":{"a":"b"},"labels":{"c":"d"}} would apply both;
// Kubernetes' strict decoding refuses it, and so does the API.
func duplicateField(data []byte) string {
	dec := json.NewDecoder(bytes.NewReader(data))
	dup, _ := walkDuplicates(dec, "")
	return dup
}

// walkDuplicates reads one JSON value from dec, whose path is path, and
// returns the path of the first duplicate member in it.
func walkDuplicates(dec *json.Decoder, path string) (string, error) {
	tok, err := dec.Token()
	if err != nil {
		return "", err
	}
	switch tok {
	case json.Delim('{'):
		seen := map[string]bool{}
		for dec.More() {
			key, err := dec.Token()
			if err != nil {
				return "", err
			}
			name, _ := key.(string)
			member := name
			if path != "" {
				member = path + "." + name
			}
			if seen[name] {
				return member, nil
			}
			seen[name] = true
			if dup, err := walkDuplicates(dec, member); dup != "" || err != nil {
				return dup, err
			}
		}
		_, err = dec.Token() // '}'
		return "", err
	case json.Delim('['):
		for i := 0; dec.More(); i++ {
			if dup, err := walkDuplicates(dec, fmt.Sprintf("%s[%d]", path, i)); dup != "" || err != nil {
				return dup, err
			}
		}
		_, err = dec.Token() // ']'
		return "", err
	}
	return "", nil
}

// readBody reads a request body of at most MaxRequestBytes. A body not
// received within the read timeout is ErrRequestTimeout.
func readBody(r *http.Request) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(r.Body, MaxRequestBytes+1))
	var ne net.Error
	switch {
	case errors.As(err, &ne) && ne.Timeout():
		return nil, fmt.Errorf("%w: request body not received within the read timeout%s", ErrRequestTimeout, readTimeoutOf(r))
	case err != nil:
		return nil, fmt.Errorf("%w: read request body: %v", ErrInvalid, err)
	case len(data) > MaxRequestBytes:
		return nil, fmt.Errorf("%w: body larger than %d bytes", ErrInvalid, MaxRequestBytes)
	}
	return data, nil
}

// readTimeoutOf returns " (30s)" for the read timeout of the server
// serving r, "" if unknown.
func readTimeoutOf(r *http.Request) string {
	if srv, ok := r.Context().Value(http.ServerContextKey).(*http.Server); ok && srv.ReadTimeout > 0 {
		return " (" + srv.ReadTimeout.String() + ")"
	}
	return ""
}

// boolQuery parses the boolean query parameter name; absent is false,
// and a value that does not parse is an error naming the parameter.
func boolQuery(r *http.Request, name string) (bool, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, fmt.Errorf("%w: query parameter %s: %q is not a boolean (true or false)", ErrInvalid, name, v)
	}
	return b, nil
}

func (s *Server) deleteNode(_ http.ResponseWriter, r *http.Request) (any, error) {
	name := r.PathValue("name")
	return map[string]string{"deleted": name}, s.backend.DeleteNode(r.Context(), name)
}

func (s *Server) listInstances(_ http.ResponseWriter, r *http.Request) (any, error) {
	return s.backend.ListInstances(r.Context())
}

func (s *Server) events(_ http.ResponseWriter, r *http.Request) (any, error) {
	q := r.URL.Query()
	f := EventFilter{Object: q.Get("object")}
	var err error
	if v := q.Get("since"); v != "" {
		if f.SinceSeq, err = strconv.ParseUint(v, 10, 64); err != nil {
			return nil, fmt.Errorf("%w: query parameter since: %q is not a sequence number", ErrInvalid, v)
		}
	}
	if v := q.Get("limit"); v != "" {
		if f.Limit, err = strconv.Atoi(v); err != nil || f.Limit < 0 {
			return nil, fmt.Errorf("%w: query parameter limit: %q is not a non-negative integer", ErrInvalid, v)
		}
	}
	return s.backend.Events(r.Context(), f)
}

func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	var verr *schema.ValidationError
	var forbidden *access.ForbiddenError
	if code, ok := imageErrorCode(err); ok {
		writeJSON(w, code, Error{Message: err.Error()})
		return
	}
	switch {
	case errors.As(err, &forbidden):
		writeJSON(w, http.StatusForbidden, Error{Message: forbidden.Error()})
	case errors.Is(err, ErrConflict):
		writeJSON(w, http.StatusConflict, Error{Message: err.Error()})
	case errors.As(err, &verr):
		writeJSON(w, http.StatusUnprocessableEntity, Error{Message: invalidWhat(r), Fields: verr.Errors})
	case errors.Is(err, ErrNotFound):
		writeJSON(w, http.StatusNotFound, Error{Message: err.Error()})
	case errors.Is(err, ErrInvalid):
		writeJSON(w, http.StatusBadRequest, Error{Message: err.Error()})
	case errors.Is(err, ErrForbidden):
		writeJSON(w, http.StatusForbidden, Error{Message: err.Error()})
	case errors.Is(err, ErrUnavailable):
		writeJSON(w, http.StatusServiceUnavailable, Error{Message: err.Error()})
	case errors.Is(err, ErrTimeout):
		writeJSON(w, http.StatusGatewayTimeout, Error{Message: err.Error()})
	case errors.Is(err, ErrRequestTimeout):
		w.Header().Set("Connection", "close")
		writeJSON(w, http.StatusRequestTimeout, Error{Message: err.Error()})
	default:
		s.log.Error("api request failed", "method", r.Method, "path", r.URL.Path, "err", err)
		writeJSON(w, http.StatusInternalServerError, Error{Message: err.Error()})
	}
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

// invalidWhat names what a request with validation errors held: a
// manifest, or, for PATCH /nodes/NAME (label, taint, cordon), a change of
// that node.
func invalidWhat(r *http.Request) string {
	if name, ok := strings.CutPrefix(r.URL.Path, "/api/"+Version+"/nodes/"); ok && r.Method == http.MethodPatch {
		return "invalid change of node " + name
	}
	return "invalid manifest"
}
