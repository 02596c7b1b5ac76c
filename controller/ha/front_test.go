package ha

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgeset/edgeset/controller/api"
	"github.com/edgeset/edgeset/controller/leader"
)

const testToken = "0123456789abcdef0123456789abcdef"

// fixedLeader is a leaderSource a test sets.
type fixedLeader struct {
	mu   sync.Mutex
	info leader.Info
	ok   bool
}

func (l *fixedLeader) Leader() (leader.Info, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.info, l.ok
}

func (l *fixedLeader) set(info leader.Info, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.info, l.ok = info, ok
}

// newTestFront serves a standby's front named id on an httptest server.
func newTestFront(t *testing.T, id string, src leaderSource) (*front, *httptest.Server) {
	gate := api.NewFront(api.Options{Token: testToken})
	f := newFront(id, api.ForwardProof(testToken, id), gate, src, http.DefaultTransport, slog.New(slog.DiscardHandler))
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	return f, srv
}

func get(t *testing.T, url, token string, header ...string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	require.NoError(t, err)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

func body(t *testing.T, resp *http.Response) string {
	t.Helper()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return string(b)
}

// TestFrontStandby: a standby answers /healthz itself, forwards only
// authenticated requests to the leader, names both controllers in the
// answer's headers, and answers 503 with Retry-After when no leader is
// known, when the leader known is itself, and for a request another
// standby already forwarded.
func TestFrontStandby(t *testing.T) {
	var upstreamCalls atomic.Int32
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		upstreamCalls.Add(1)
		w.Header().Set(HeaderServedBy, "c1")
		io.WriteString(w, "leader saw "+r.URL.Path+" forwarded by "+r.Header.Get(HeaderForwardedBy))
	}))
	t.Cleanup(upstream.Close)
	src := &fixedLeader{}
	_, srv := newTestFront(t, "c2", src)

	tests := []struct {
		name       string
		leader     leader.Info
		known      bool
		token      string
		header     []string
		wantCode   int
		wantBody   string
		wantServed string
		forwarded  bool
	}{
		{name: "no leader", token: testToken, wantCode: 503, wantBody: "no leader is elected", wantServed: "c2"},
		{name: "itself", leader: leader.Info{ID: "c2", APIURL: srv.URL}, known: true, token: testToken, wantCode: 503, wantBody: "no leader is elected", wantServed: "c2"},
		{name: "no token", leader: leader.Info{ID: "c1", APIURL: upstream.URL}, known: true, wantCode: 401, wantServed: "c2"},
		{name: "loop", leader: leader.Info{ID: "c1", APIURL: upstream.URL}, known: true, token: testToken,
			header: []string{HeaderForwardedBy, "c3"}, wantCode: 503, wantBody: "not the leader (forwarded by c3)", wantServed: "c2"},
		{name: "bad URL", leader: leader.Info{ID: "c1", APIURL: "::"}, known: true, token: testToken, wantCode: 503, wantBody: "not a URL", wantServed: "c2"},
		{name: "forwarded", leader: leader.Info{ID: "c1", APIURL: upstream.URL}, known: true, token: testToken,
			wantCode: 200, wantBody: "leader saw /api/v1/daemonsets forwarded by c2", wantServed: "c1", forwarded: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			src.set(tc.leader, tc.known)
			before := upstreamCalls.Load()
			resp := get(t, srv.URL+"/api/v1/daemonsets", tc.token, tc.header...)
			assert.Equal(t, tc.wantCode, resp.StatusCode)
			assert.Contains(t, body(t, resp), tc.wantBody)
			assert.Equal(t, tc.wantServed, resp.Header.Get(HeaderServedBy))
			if tc.wantCode == 503 {
				assert.Equal(t, retryAfter, resp.Header.Get("Retry-After"))
			}
			if tc.forwarded {
				assert.Equal(t, before+1, upstreamCalls.Load())
				assert.Equal(t, "c2", resp.Header.Get(HeaderForwardedBy))
			} else {
				assert.Equal(t, before, upstreamCalls.Load(), "not forwarded")
			}
		})
	}

	src.set(leader.Info{}, false)
	resp := get(t, srv.URL+"/healthz", "")
	assert.Equal(t, 200, resp.StatusCode)
	resp = get(t, srv.URL+"/readyz", "")
	assert.Equal(t, 503, resp.StatusCode)
	assert.Contains(t, body(t, resp), "no leader is elected")
	src.set(leader.Info{ID: "c1", APIURL: upstream.URL}, true)
	resp = get(t, srv.URL+"/readyz", "")
	assert.Equal(t, 200, resp.StatusCode)
	assert.Contains(t, body(t, resp), "role: standby (c2), forwarding to leader c1")
}

// TestFrontLeaderDown: a leader that cannot be dialled is a 503 (the
// client may retry elsewhere); one that drops the connection after
// receiving the request is a 502 (it must not: the write may have landed).
func TestFrontLeaderDown(t *testing.T) {
	dead := httptest.NewServer(http.NotFoundHandler())
	deadURL := dead.URL
	dead.Close()
	dropper := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			conn.Close()
		}
	}))
	t.Cleanup(dropper.Close)
	src := &fixedLeader{}
	_, srv := newTestFront(t, "c2", src)

	src.set(leader.Info{ID: "c1", APIURL: deadURL}, true)
	resp := get(t, srv.URL+"/api/v1/nodes", testToken)
	assert.Equal(t, 503, resp.StatusCode)
	assert.Contains(t, body(t, resp), "forward to the leader")

	src.set(leader.Info{ID: "c1", APIURL: dropper.URL}, true)
	resp = get(t, srv.URL+"/api/v1/nodes", testToken)
	assert.Equal(t, 502, resp.StatusCode)
	assert.Contains(t, body(t, resp), "may have been applied")
}

// TestFrontStreams: a streamed answer (a log follow) reaches the client
// through a standby chunk by chunk, not when the leader's answer ends.
func TestFrontStreams(t *testing.T) {
	release := make(chan struct{})
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "first line\n")
		http.NewResponseController(w).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
		}
		io.WriteString(w, "second line\n")
	}))
	t.Cleanup(upstream.Close)
	t.Cleanup(func() { close(release) })
	_, srv := newTestFront(t, "c2", &fixedLeader{info: leader.Info{ID: "c1", APIURL: upstream.URL}, ok: true})

	resp := get(t, srv.URL+"/api/v1/daemonsets/ns/ds/logs?follow=true", testToken)
	require.Equal(t, 200, resp.StatusCode)
	lines := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(resp.Body).ReadString('\n')
		lines <- line
	}()
	select {
	case line := <-lines:
		assert.Equal(t, "first line\n", line)
	case <-time.After(10 * time.Second):
		t.Fatal("the first chunk did not come through the standby before the leader's answer ended")
	}
}

// TestFrontLeading: while leading, every request but /healthz goes to
// the controller's API, which authenticates it itself; /readyz carries
// the controller's answer and the role.
func TestFrontLeading(t *testing.T) {
	f, srv := newTestFront(t, "c1", &fixedLeader{})
	f.setLeading(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/readyz" {
			io.WriteString(w, "ok\n")
			return
		}
		io.WriteString(w, "controller "+r.URL.Path+" auth="+strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer "))
	}))
	resp := get(t, srv.URL+"/api/v1/nodes", "")
	assert.Equal(t, 200, resp.StatusCode)
	assert.Equal(t, "controller /api/v1/nodes auth=", body(t, resp), "the controller's API decides, not the front")
	assert.Equal(t, "c1", resp.Header.Get(HeaderServedBy))
	resp = get(t, srv.URL+"/readyz", "")
	assert.Equal(t, "ok\nrole: leader (c1)\n", body(t, resp))
	f.setLeading(nil)
	resp = get(t, srv.URL+"/api/v1/nodes", testToken)
	assert.Equal(t, 503, resp.StatusCode)
}

// TestFrontRedirectsDashboard: a standby sends a browser to the leader's
// dashboard, path and query kept, without asking for a bearer token (the
// dashboard signs in with its own session), and answers 503 while no
// leader is elected.
func TestFrontRedirectsDashboard(t *testing.T) {
	src := &fixedLeader{}
	_, srv := newTestFront(t, "c2", src)
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

	resp, err := noFollow.Get(srv.URL + "/ui/nodes?page=2")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	assert.Equal(t, retryAfter, resp.Header.Get("Retry-After"))

	src.set(leader.Info{ID: "c1", APIURL: "http://10.0.0.1:8080"}, true)
	for path, want := range map[string]string{
		"/ui/nodes?page=2": "http://10.0.0.1:8080/ui/nodes?page=2",
		"/":                "http://10.0.0.1:8080/",
	} {
		resp, err := noFollow.Get(srv.URL + path)
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, http.StatusTemporaryRedirect, resp.StatusCode, path)
		assert.Equal(t, want, resp.Header.Get("Location"), path)
	}
	resp, err = noFollow.Get(srv.URL + "/api/v1/nodes")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusUnauthorized, resp.StatusCode, "the API still needs its token on a standby")
}

// TestFrontForwardsNodeRequests: a device's own requests (image fetches,
// key registration) carry its node credential, which only the leader can
// check: a standby forwards them, credential and all, with or without
// one, while a user's request without a token stays refused at the
// standby.
func TestFrontForwardsNodeRequests(t *testing.T) {
	var seen atomic.Value
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		node, token, _ := r.BasicAuth()
		seen.Store(r.Method + " " + r.URL.Path + " as " + node + ":" + token)
		if node == "" {
			http.Error(w, "missing or wrong node credential", http.StatusUnauthorized)
			return
		}
		io.WriteString(w, "leader served "+node)
	}))
	t.Cleanup(upstream.Close)
	_, srv := newTestFront(t, "c2", &fixedLeader{info: leader.Info{ID: "c1", APIURL: upstream.URL}, ok: true})

	req, err := http.NewRequest(http.MethodPut, srv.URL+api.NodeKeyPath, strings.NewReader(`{}`))
	require.NoError(t, err)
	req.SetBasicAuth("gw-1", "node-token")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, "leader served gw-1", body(t, resp))
	resp.Body.Close()
	assert.Equal(t, "PUT "+api.NodeKeyPath+" as gw-1:node-token", seen.Load())

	resp = get(t, srv.URL+api.NodeImagesPrefix+"manifests?image=x", "")
	assert.Equal(t, http.StatusUnauthorized, resp.StatusCode, "the leader's refusal")
	assert.Equal(t, "GET "+api.NodeImagesPrefix+"manifests as :", seen.Load(), "forwarded without a credential")
	assert.Equal(t, "c2", resp.Header.Get(HeaderForwardedBy))

	seen.Store("")
	resp = get(t, srv.URL+"/api/v1/daemonsets", "")
	assert.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	assert.Equal(t, "", seen.Load(), "a user's request without a token is not forwarded")
}

// serveStandby serves standby c2's front, forwarding to leader c1 at
// leaderURL, within limits, as an HA controller serves it
// (api.Front.ServeHandler: its timeouts and connection caps), until the
// end of the test; it returns the front's base URL.
func serveStandby(t *testing.T, limits api.Limits, leaderURL string) string {
	gate := api.NewFront(api.Options{Token: testToken, Limits: limits})
	f := newFront("c2", api.ForwardProof(testToken, "c2"), gate, &fixedLeader{info: leader.Info{ID: "c1", APIURL: leaderURL}, ok: true},
		http.DefaultTransport, slog.New(slog.DiscardHandler))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- gate.ServeHandler(ctx, ln, f) }()
	t.Cleanup(func() { cancel(); <-served })
	return "http://" + ln.Addr().String()
}

// TestFrontStreamsPastWriteTimeout: a response the leader writes as it
// goes (a blob download, a log follow) reaches the client whole through a
// standby however long it lasts, as long as it keeps moving: the standby
// moves its write deadline with every write, as the leader does.
func TestFrontStreamsPastWriteTimeout(t *testing.T) {
	const chunks = 8
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for i := range chunks {
			fmt.Fprintf(w, "chunk %d\n", i)
			_ = http.NewResponseController(w).Flush()
			time.Sleep(100 * time.Millisecond)
		}
	}))
	t.Cleanup(upstream.Close)
	base := serveStandby(t, api.Limits{WriteTimeout: 250 * time.Millisecond}, upstream.URL)

	for _, path := range []string{api.NodeImagesPrefix + "blobs/sha256:00", "/api/v1/logs"} {
		resp := get(t, base+path, testToken)
		require.Equal(t, http.StatusOK, resp.StatusCode)
		assert.Equal(t, chunks, strings.Count(body(t, resp), "chunk"), path)
	}
}

// TestFrontForwardedDeviceAuthenticates: a device's request the leader
// accepted frees its connection's unauthenticated place on the standby
// too, so long downloads through a standby do not fill its
// MaxUnauthenticatedConns and lock everyone else out.
func TestFrontForwardedDeviceAuthenticates(t *testing.T) {
	release := make(chan struct{})
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "start\n")
		_ = http.NewResponseController(w).Flush()
		if api.IsNodePath(r.URL.Path) {
			<-release
		}
	}))
	t.Cleanup(upstream.Close)
	t.Cleanup(func() { close(release) })
	base := serveStandby(t, api.Limits{MaxUnauthenticatedConns: 1}, upstream.URL)

	download := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	req, err := http.NewRequest(http.MethodGet, base+api.NodeImagesPrefix+"blobs/sha256:00", nil)
	require.NoError(t, err)
	req.SetBasicAuth("gw-1", "node-token")
	resp, err := download.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, "start\n", line) // the download is under way

	other := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	req, err = http.NewRequest(http.MethodGet, base+"/api/v1/daemonsets", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+testToken)
	resp2, err := other.Do(req)
	require.NoError(t, err, "a second connection is accepted while the download runs")
	defer resp2.Body.Close()
	assert.Equal(t, http.StatusOK, resp2.StatusCode)
}
