package ha

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync"

	"github.com/edgeset/edgeset/controller/api"
	"github.com/edgeset/edgeset/controller/leader"
)

// Headers the front adds.
const (
	// HeaderServedBy names the controller whose API answered a request.
	HeaderServedBy = "Edgeset-Controller"
	// HeaderForwardedBy names the standby that forwarded a request to the
	// leader, on the request and on its answer. A standby does not forward
	// a request that carries it: a leader that is no longer leader answers
	// 503 instead of sending it round in a loop.
	HeaderForwardedBy = api.HeaderForwardedBy
)

// retryAfter is the Retry-After of a 503 while no leader is known, in
// seconds: an election takes about that long once the old leader's key is
// gone.
const retryAfter = "1"

// leaderSource tells the front who leads (a leader.Observer).
type leaderSource interface {
	Leader() (leader.Info, bool)
}

// front is the one HTTP handler of an HA controller process. While the
// process leads it hands every request to the leading controller's API
// (which authenticates it); while it stands by it authenticates a
// request itself and forwards it to the leader's advertised URL, and
// with no leader known it answers 503. A device's own requests (its
// enrollment, its image fetches and key registration, which carry its
// code or its node credential, not a user's token) it forwards for the
// leader to authenticate. /healthz and /readyz are always
// answered here.
type front struct {
	id     string
	gate   *api.Front // authenticates what is forwarded
	leader leaderSource
	proxy  *httputil.ReverseProxy
	log    *slog.Logger

	mu      sync.Mutex   // guards leading
	leading http.Handler // the leading controller's API; nil when standing by
}

type targetKey struct{}

// newFront returns the front of controller id; proof (may be empty) is
// its api.ForwardProof, sent with every forwarded request.
func newFront(id, proof string, gate *api.Front, src leaderSource, transport http.RoundTripper, log *slog.Logger) *front {
	f := &front{id: id, gate: gate, leader: src, log: log}
	f.proxy = &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(pr.In.Context().Value(targetKey{}).(*url.URL))
			pr.SetXForwarded()
			pr.Out.Header.Set(HeaderForwardedBy, id)
			if proof != "" {
				pr.Out.Header.Set(api.HeaderForwardProof, proof)
			}
		},
		Transport: transport,
		// Flush every write at once: log follows and event watches
		// stream through the standby.
		FlushInterval: -1,
		ModifyResponse: func(resp *http.Response) error {
			resp.Header.Set(HeaderForwardedBy, id)
			if api.IsNodePath(resp.Request.URL.Path) && resp.StatusCode != http.StatusUnauthorized &&
				resp.StatusCode != http.StatusTooManyRequests {
				// The leader took the node's credential: the connection
				// no longer counts as unauthenticated here either.
				api.MarkAuthenticated(resp.Request)
			}
			return nil
		},
		ErrorHandler: f.forwardFailed,
		ErrorLog:     slog.NewLogLogger(log.Handler(), slog.LevelDebug),
	}
	return f
}

// setLeading makes h (nil: none) the handler of every request but
// /healthz and /readyz.
func (f *front) setLeading(h http.Handler) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.leading = h
}

func (f *front) current() http.Handler {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.leading
}

// ServeHTTP serves r as the type describes.
func (f *front) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/healthz":
		w.Header().Set(HeaderServedBy, f.id)
		io.WriteString(w, "ok\n")
		return
	case "/readyz":
		f.readyz(w, r)
		return
	}
	if h := f.current(); h != nil {
		w.Header().Set(HeaderServedBy, f.id)
		h.ServeHTTP(w, r)
		return
	}
	w.Header().Set(HeaderServedBy, f.id) // unless forwarded, below
	if api.IsUIPath(r.URL.Path) {
		f.redirectUI(w, r)
		return
	}
	admit := f.gate.Admit
	if api.IsNodePath(r.URL.Path) {
		admit = f.gate.AdmitDevice // the leader checks the node's credential
	}
	if !admit(w, r) {
		return
	}
	info, ok := f.leader.Leader()
	switch {
	case !ok || info.ID == f.id:
		f.noLeader(w, "no leader is elected")
		return
	case r.Header.Get(HeaderForwardedBy) != "":
		f.noLeader(w, fmt.Sprintf("controller %s is not the leader (forwarded by %s)", f.id, r.Header.Get(HeaderForwardedBy)))
		return
	}
	target, err := url.Parse(info.APIURL)
	if err != nil || target.Host == "" {
		f.noLeader(w, fmt.Sprintf("leader %s advertises %q, not a URL", info.ID, info.APIURL))
		return
	}
	w.Header().Del(HeaderServedBy) // the leader's answer names the leader
	// The leader extends its write deadline as it writes (a download, a
	// log follow); so does the standby, or the stream is cut at the
	// write timeout.
	f.proxy.ServeHTTP(f.gate.ProgressWriter(w), r.WithContext(context.WithValue(r.Context(), targetKey{}, target)))
}

// redirectUI sends a browser to the leader's dashboard: the dashboard's
// sessions and its same-origin checks belong to the controller that
// serves it, so a standby redirects rather than forwards (a session ends
// with its leader's term: sign in again after a failover).
func (f *front) redirectUI(w http.ResponseWriter, r *http.Request) {
	info, ok := f.leader.Leader()
	target, err := url.Parse(info.APIURL)
	if !ok || info.ID == f.id || err != nil || target.Host == "" {
		w.Header().Set("Retry-After", retryAfter)
		http.Error(w, "no leader is elected; the dashboard is served by the leader: reload shortly", http.StatusServiceUnavailable)
		return
	}
	target.Path, target.RawQuery = r.URL.Path, r.URL.RawQuery
	http.Redirect(w, r, target.String(), http.StatusTemporaryRedirect)
}

// readyz answers ready with the controller's role: the leader's own
// readiness, a standby's when it knows a leader to forward to, 503 when
// no leader is elected.
func (f *front) readyz(w http.ResponseWriter, r *http.Request) {
	w.Header().Set(HeaderServedBy, f.id)
	if h := f.current(); h != nil {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		w.Header().Set("Content-Type", rec.Header().Get("Content-Type"))
		w.WriteHeader(rec.Code)
		_, _ = rec.Body.WriteTo(w)
		fmt.Fprintf(w, "role: leader (%s)\n", f.id)
		return
	}
	info, ok := f.leader.Leader()
	if !ok || info.ID == f.id {
		w.Header().Set("Retry-After", retryAfter)
		http.Error(w, fmt.Sprintf("not ready: no leader is elected\nrole: standby (%s)", f.id), http.StatusServiceUnavailable)
		return
	}
	fmt.Fprintf(w, "ok\nrole: standby (%s), forwarding to leader %s at %s\n", f.id, info.ID, info.APIURL)
}

// noLeader answers 503 with Retry-After and the API's error body.
func (f *front) noLeader(w http.ResponseWriter, msg string) {
	w.Header().Set(HeaderServedBy, f.id)
	w.Header().Set("Retry-After", retryAfter)
	writeError(w, http.StatusServiceUnavailable, msg+"; retry shortly")
}

// forwardFailed answers a request the leader did not answer. When the
// leader could not even be dialled (it may have just died; a new one is
// elected within the lease TTL) the answer is 503 with Retry-After, which
// clients may retry elsewhere; once the request may have reached the
// leader it is 502, which they must not: the write may have landed.
func (f *front) forwardFailed(w http.ResponseWriter, r *http.Request, err error) {
	target, _ := r.Context().Value(targetKey{}).(*url.URL)
	f.log.Debug("forward to the leader failed", "leader", target, "path", r.URL.Path, "err", err)
	if r.Context().Err() != nil {
		return // the client went away
	}
	w.Header().Set(HeaderServedBy, f.id)
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		w.Header().Set("Retry-After", retryAfter)
		writeError(w, http.StatusServiceUnavailable, fmt.Sprintf("forward to the leader at %s: %v; retry shortly", target, err))
		return
	}
	writeError(w, http.StatusBadGateway, fmt.Sprintf("forward to the leader at %s: %v (the request may have been applied)", target, err))
}

func writeError(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(api.Error{Message: msg})
}
