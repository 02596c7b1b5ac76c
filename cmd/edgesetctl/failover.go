package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"strings"
	"sync/atomic"
	"time"

	"github.com/edgeset/edgeset/controller/api"
)

// Limits of failing over between --server URLs.
const (
	// maxServers bounds the --server list.
	maxServers = 16
	// failoverDialTimeout bounds connecting to one server of several, so a
	// black-holed first server leaves the request time for the next.
	failoverDialTimeout = 5 * time.Second
	// maxUnavailableBody is how much of a 503 answer is read for the error.
	maxUnavailableBody = 4 << 10
)

// failover is the HTTP transport of a client with several servers (an HA
// controller's standbys). A request goes to the first server; it moves on
// to the next only when it cannot have been received (the connection
// failed before the request got one: refused, unreachable, dial or TLS
// failure) or the server answered 503 (a standby, or a controller not
// ready). A request that failed after it got a connection (a timeout
// after sending, a reset) is never repeated, idempotent or not. When
// every server fails, the error names each and why.
type failover struct {
	servers []string // base URLs; requests arrive built for servers[0]
	next    http.RoundTripper
}

// newFailoverClient returns the HTTP client of a client with several
// servers; timeout bounds each request, all its attempts together.
func newFailoverClient(servers []string, timeout time.Duration) *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.DialContext = (&net.Dialer{Timeout: failoverDialTimeout, KeepAlive: 30 * time.Second}).DialContext
	return &http.Client{Timeout: timeout, Transport: &failover{servers: servers, next: t}}
}

// RoundTrip sends req to each server in turn, as the type describes.
func (f *failover) RoundTrip(req *http.Request) (*http.Response, error) {
	path, ok := strings.CutPrefix(req.URL.String(), f.servers[0])
	if !ok {
		return f.next.RoundTrip(req)
	}
	var failures []error
	for i, server := range f.servers {
		attempt, err := retarget(req, server+path, i > 0)
		if err != nil {
			break // the body cannot be sent again
		}
		resp, connected, err := f.try(attempt)
		switch {
		case err == nil && resp.StatusCode != http.StatusServiceUnavailable:
			return resp, nil
		case err == nil:
			failures = append(failures, fmt.Errorf("%s: %w", server, unavailable(resp)))
		case connected || req.Context().Err() != nil:
			// The server may have the request: never send it twice.
			return nil, err
		default:
			failures = append(failures, fmt.Errorf("%s: %w", server, err))
		}
	}
	return nil, &allServersFailed{failures: failures}
}

// try sends req and reports whether it got a connection: once it has,
// some of the request may have been written.
func (f *failover) try(req *http.Request) (*http.Response, bool, error) {
	var connected atomic.Bool
	trace := &httptrace.ClientTrace{GotConn: func(httptrace.GotConnInfo) { connected.Store(true) }}
	req = req.WithContext(httptrace.WithClientTrace(req.Context(), trace))
	resp, err := f.next.RoundTrip(req)
	return resp, connected.Load(), err
}

// retarget returns a copy of req for url; again asks for a fresh body,
// which fails when req's cannot be replayed.
func retarget(req *http.Request, url string, again bool) (*http.Request, error) {
	out := req.Clone(req.Context())
	u, err := req.URL.Parse(url)
	if err != nil {
		return nil, err
	}
	out.URL, out.Host = u, u.Host
	if again && req.Body != nil && req.Body != http.NoBody {
		if req.GetBody == nil {
			return nil, errors.New("request body cannot be replayed")
		}
		if out.Body, err = req.GetBody(); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// unavailable reads a 503 answer into an error that wraps
// api.ErrUnavailable and carries the controller's message.
func unavailable(resp *http.Response) error {
	defer resp.Body.Close()
	data, _ := io.ReadAll(io.LimitReader(resp.Body, maxUnavailableBody))
	var body api.Error
	msg := string(bytes.TrimSpace(data))
	if json.Unmarshal(data, &body) == nil && body.Message != "" {
		msg = body.Message
	}
	return fmt.Errorf("%w (HTTP 503): %s", api.ErrUnavailable, msg)
}

// allServersFailed is a request no server took, with why for each.
type allServersFailed struct {
	failures []error
}

func (e *allServersFailed) Error() string {
	parts := make([]string, len(e.failures))
	for i, f := range e.failures {
		parts[i] = f.Error()
	}
	return fmt.Sprintf("no server took the request (%d tried): %s", len(parts), strings.Join(parts, "; "))
}

// Unwrap lets errors.Is and errors.As see every server's failure (a
// refused connection, api.ErrUnavailable).
func (e *allServersFailed) Unwrap() []error { return e.failures }

// parseServers turns the server setting (a string, comma-separated, or a
// YAML list) into base URLs: trimmed, without a trailing slash, http://
// when no scheme is given. Each error names the setting and the entry.
func parseServers(v any) ([]string, error) {
	var raw []string
	switch v := v.(type) {
	case string:
		raw = strings.Split(v, ",")
	case []string:
		raw = v
	case []any:
		for _, e := range v {
			raw = append(raw, fmt.Sprint(e))
		}
	default:
		return nil, fmt.Errorf("server: %v is not a URL or a list of URLs", v)
	}
	if len(raw) > maxServers {
		return nil, fmt.Errorf("server: %d URLs, at most %d", len(raw), maxServers)
	}
	out := make([]string, len(raw))
	for i, s := range raw {
		s = strings.TrimRight(strings.TrimSpace(s), "/")
		if s == "" {
			return nil, fmt.Errorf("server: entry %d of %q is empty", i, strings.Join(raw, ","))
		}
		if !strings.Contains(s, "://") {
			s = "http://" + s
		}
		out[i] = s
	}
	return out, nil
}
