package api

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptrace"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgeset/edgeset/internal/checkfor"
)

// countingObserver counts what the server refuses.
type countingObserver struct {
	authFailed, authThrottled atomic.Int64
	acceptFailed              atomic.Int64
	mu                        sync.Mutex
	refused                   map[string]int
}

func (o *countingObserver) AcceptFailed()  { o.acceptFailed.Add(1) }
func (o *countingObserver) AuthFailed()    { o.authFailed.Add(1) }
func (o *countingObserver) AuthThrottled() { o.authThrottled.Add(1) }
func (o *countingObserver) ConnRefused(reason string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.refused == nil {
		o.refused = map[string]int{}
	}
	o.refused[reason]++
}

func (o *countingObserver) refusals(reason string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.refused[reason]
}

var _ Observer = (*countingObserver)(nil)

const testToken = "secret-token"

// serveOnLoopback serves s on 127.0.0.1:0 until the test ends and returns
// its address.
func serveOnLoopback(t *testing.T, s *Server) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		assert.NoError(t, <-done, "Serve returns nil after its context ends")
	})
	return ln.Addr().String()
}

func startLimited(t *testing.T, b Backend, limits Limits, obs Observer) string {
	t.Helper()
	return serveOnLoopback(t, New(b, Options{Token: testToken, Limits: limits, Observer: obs}))
}

// dialRaw opens a TCP connection to addr, closed when the test ends.
func dialRaw(t *testing.T, addr string) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	return conn
}

// readResponse reads one response from conn, waiting at most 10 s.
func readResponse(t *testing.T, conn net.Conn, br *bufio.Reader) (*http.Response, string) {
	t.Helper()
	require.NoError(t, conn.SetReadDeadline(time.Now().Add(10*time.Second)))
	resp, err := http.ReadResponse(br, nil)
	require.NoError(t, err, "no response")
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	resp.Body.Close()
	return resp, string(body)
}

// expectClosed fails unless the server closes conn within 10 s.
func expectClosed(t *testing.T, conn net.Conn, br *bufio.Reader) {
	t.Helper()
	require.NoError(t, conn.SetReadDeadline(time.Now().Add(10*time.Second)))
	_, err := br.ReadByte()
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatal("the server kept the connection open")
	}
	assert.Error(t, err, "the server closed the connection")
}

// TestSlowBodyIsCut: an authenticated client trickling its body is
// answered 408 once the read timeout passes, and its connection closed.
func TestSlowBodyIsCut(t *testing.T) {
	called := false
	b := &fakeBackend{apply: func(string, []byte, bool) ([]ApplyResult, error) { called = true; return nil, nil }}
	addr := startLimited(t, b, Limits{ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 300 * time.Millisecond}, nil)
	conn := dialRaw(t, addr)
	_, err := fmt.Fprintf(conn, "POST /api/v1/apply HTTP/1.1\r\nHost: edgeset\r\nAuthorization: Bearer %s\r\nContent-Length: 10000\r\n\r\n", testToken)
	require.NoError(t, err)
	stop := make(chan struct{})
	trickled := make(chan struct{})
	go func() { // one byte every 50 ms: the body would take 500 s
		defer close(trickled)
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for range 200 {
			if _, err := conn.Write([]byte("x")); err != nil {
				return
			}
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	}()
	br := bufio.NewReader(conn)
	resp, body := readResponse(t, conn, br)
	close(stop)
	<-trickled
	assert.Equal(t, http.StatusRequestTimeout, resp.StatusCode, body)
	assert.Contains(t, body, "read timeout (300ms)")
	expectClosed(t, conn, br)
	assert.False(t, called, "a body cut short reaches no backend method")
}

// TestUnauthenticatedBodyRefusedAtOnce: a request with no or a wrong
// token is answered 401 from its headers alone, and its connection closed,
// while its body is still coming; on every endpoint that reads a body.
func TestUnauthenticatedBodyRefusedAtOnce(t *testing.T) {
	addr := startLimited(t, &fakeBackend{}, Limits{ReadHeaderTimeout: time.Minute, ReadTimeout: time.Minute}, nil)
	requests := []string{
		"POST /api/v1/apply",
		"PATCH /api/v1/nodes/gw-1",
		"POST /api/v1/daemonsets/default/fluentd/rollout",
		"POST /api/v1/no-such-endpoint",
	}
	framings := map[string]string{
		"content-length": "Content-Length: 100000\r\n\r\n{\"labels\":",
		"chunked":        "Transfer-Encoding: chunked\r\n\r\n1000\r\n{\"labels\":",
	}
	for _, req := range requests {
		for framing, rest := range framings {
			for _, auth := range []string{"", "Authorization: Bearer wrong\r\n"} {
				name := fmt.Sprintf("%s,%s,token=%t", strings.ReplaceAll(req, "/", "_"), framing, auth != "")
				t.Run(name, func(t *testing.T) {
					conn := dialRaw(t, addr)
					_, err := fmt.Fprintf(conn, "%s HTTP/1.1\r\nHost: edgeset\r\n%s%s", req, auth, rest)
					require.NoError(t, err)
					br := bufio.NewReader(conn)
					resp, body := readResponse(t, conn, br)
					assert.Equal(t, http.StatusUnauthorized, resp.StatusCode, body)
					assert.True(t, resp.Close, "Connection: close")
					expectClosed(t, conn, br)
				})
			}
		}
	}
}

// TestUnauthenticatedConnCap: past the cap, new connections are closed at
// once and counted, while an authenticated client keeps being served; a
// slot frees when an unauthenticated connection goes.
func TestUnauthenticatedConnCap(t *testing.T) {
	obs := &countingObserver{}
	b := &fakeBackend{getNode: func(name string) (Node, error) { return Node{}, nil }}
	addr := startLimited(t, b, Limits{ReadHeaderTimeout: time.Minute, MaxUnauthenticatedConns: 2}, obs)
	c := NewClient("http://"+addr, testToken, &http.Client{Transport: &http.Transport{}})
	reused := func() bool {
		var got bool
		ctx := httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{
			GotConn: func(i httptrace.GotConnInfo) { got = i.Reused },
		})
		_, err := c.GetNode(ctx, "gw-1")
		require.NoError(t, err)
		return got
	}
	reused() // authenticates the client's connection

	idle := []net.Conn{dialRaw(t, addr), dialRaw(t, addr)}
	extra := dialRaw(t, addr)
	expectClosed(t, extra, bufio.NewReader(extra))
	assert.Equal(t, 1, obs.refusals(ConnRefusedUnauthenticated))
	assert.True(t, reused(), "the authenticated client is served on its connection")

	idle[0].Close()
	checkfor.Eventually(t, 10*time.Second, 20*time.Millisecond, func() error {
		conn := dialRaw(t, addr)
		defer conn.Close()
		if _, err := io.WriteString(conn, "GET /healthz HTTP/1.1\r\nHost: edgeset\r\n\r\n"); err != nil {
			return err
		}
		require.NoError(t, conn.SetReadDeadline(time.Now().Add(10*time.Second)))
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			return fmt.Errorf("connection refused after a slot was freed: %w", err)
		}
		resp.Body.Close()
		return nil
	})
}

// TestConnsPerSourceCap: one source cannot open more than its share;
// refusals are counted, and logged at most once per interval.
func TestConnsPerSourceCap(t *testing.T) {
	obs := &countingObserver{}
	logs := &syncBuffer{}
	s := New(&fakeBackend{}, Options{Token: testToken, Observer: obs, Log: slog.New(slog.NewTextHandler(logs, nil)),
		Limits: Limits{ReadHeaderTimeout: time.Minute, MaxConnsPerSource: 2, AuthLogInterval: time.Hour}})
	addr := serveOnLoopback(t, s)
	dialRaw(t, addr)
	dialRaw(t, addr)
	for range 3 {
		extra := dialRaw(t, addr)
		expectClosed(t, extra, bufio.NewReader(extra))
	}
	assert.Equal(t, 3, obs.refusals(ConnRefusedPerSource))
	assert.Zero(t, obs.refusals(ConnRefusedUnauthenticated))
	refused := logs.lines("api connection refused")
	require.Len(t, refused, 1, "one line per interval")
	assert.Contains(t, refused[0], "reason=per-source")
	assert.Contains(t, refused[0], "source=127.0.0.1")
}

// fakeClock is a settable clock.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// syncBuffer is a bytes.Buffer safe for a logger and a test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) lines(substr string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, l := range strings.Split(s.b.String(), "\n") {
		if strings.Contains(l, substr) {
			out = append(out, l)
		}
	}
	return out
}

// TestAuthFailuresCountedAndThrottled: failed authentications are
// counted; past the limit their source is answered 429 with Retry-After,
// even with the right token, until the window passes; the log has one
// line per source and interval, the next one counting those suppressed.
func TestAuthFailuresCountedAndThrottled(t *testing.T) {
	obs := &countingObserver{}
	logs := &syncBuffer{}
	b := &fakeBackend{getNode: func(name string) (Node, error) { return Node{}, nil }}
	s := New(b, Options{Token: testToken, Observer: obs, Log: slog.New(slog.NewTextHandler(logs, nil)),
		Limits: Limits{AuthFailures: 3, AuthFailureWindow: time.Minute, AuthLogInterval: time.Minute}})
	clock := &fakeClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	s.guard.now = clock.Now
	addr := serveOnLoopback(t, s)
	get := func(path, token string) *http.Response {
		req, err := http.NewRequest(http.MethodGet, "http://"+addr+path, nil)
		require.NoError(t, err)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}
	const node = "/api/v1/nodes/gw-1"
	assert.Equal(t, http.StatusOK, get(node, testToken).StatusCode)
	assert.Equal(t, http.StatusUnauthorized, get(node, "").StatusCode)
	assert.Equal(t, http.StatusUnauthorized, get(node, "wrong").StatusCode)
	assert.Equal(t, http.StatusUnauthorized, get(node, "wrong").StatusCode)
	for _, token := range []string{"wrong", testToken} {
		resp := get(node, token)
		assert.Equal(t, http.StatusTooManyRequests, resp.StatusCode, "token %q from a blocked source", token)
		assert.Equal(t, "60", resp.Header.Get("Retry-After"))
	}
	assert.Equal(t, http.StatusOK, get("/healthz", "").StatusCode, "/healthz needs no token and is not throttled")
	assert.EqualValues(t, 3, obs.authFailed.Load())
	assert.EqualValues(t, 2, obs.authThrottled.Load())
	assert.Len(t, logs.lines("api authentication failed"), 1, "one line per source and interval")
	assert.Len(t, logs.lines("api source blocked"), 1)

	clock.Advance(30 * time.Second)
	resp := get(node, testToken)
	assert.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
	assert.Equal(t, "30", resp.Header.Get("Retry-After"))

	clock.Advance(31 * time.Second)
	assert.Equal(t, http.StatusOK, get(node, testToken).StatusCode, "the block ends with its window")
	assert.Equal(t, http.StatusUnauthorized, get(node, "wrong").StatusCode)
	failed := logs.lines("api authentication failed")
	require.Len(t, failed, 2)
	assert.Contains(t, failed[1], "suppressed=2")
	assert.Contains(t, failed[1], "source=127.0.0.1")
}

// TestRequestBodyStrictJSON: a JSON body is one object and nothing after
// it but white space; an empty body is refused naming what is expected.
func TestRequestBodyStrictJSON(t *testing.T) {
	called := 0
	b := &rolloutBackend{fakeBackend: fakeBackend{
		updateNode: func(string, NodePatch) (Node, error) { called++; return Node{}, nil },
	}, rollout: func(string, RolloutRequest) (DaemonSet, error) { called++; return DaemonSet{}, nil }}
	addr := startLimited(t, b, Limits{}, nil)
	send := func(method, path, body string) (int, string) { return sendAuthorized(t, addr, method, path, body) }
	const patch, rollout = "/api/v1/nodes/gw-1", "/api/v1/daemonsets/default/fluentd/rollout"
	tests := []struct {
		name, method, path, body string
		code                     int
		msg                      string
	}{
		{"patch", http.MethodPatch, patch, `{"labels":{"a":"b"}}` + "\n", http.StatusOK, ""},
		{"patch trailing object", http.MethodPatch, patch, `{"labels":{"a":"b"}}{"labels":{"c":"d"}}`, http.StatusBadRequest, "after the JSON object"},
		{"patch trailing garbage", http.MethodPatch, patch, `{"labels":{"a":"b"}} x`, http.StatusBadRequest, "after the JSON object"},
		{"patch empty", http.MethodPatch, patch, ``, http.StatusBadRequest, "empty"},
		{"patch null", http.MethodPatch, patch, `null`, http.StatusBadRequest, "JSON object"},
		{"rollout trailing object", http.MethodPost, rollout, `{"action":"restart"}{"action":"undo"}`, http.StatusBadRequest, "after the JSON object"},
		{"rollout", http.MethodPost, rollout, `{"action":"restart"}`, http.StatusOK, ""},
		// A field given twice is refused, as Kubernetes' strict decoding
		// does: encoding/json would merge or overwrite it silently.
		{"patch duplicate field", http.MethodPatch, patch, `{"labels":{"a":"b"},"labels":{"c":"d"}}`, http.StatusBadRequest, `duplicate field "labels"`},
		{"patch duplicate label", http.MethodPatch, patch, `{"labels":{"a":"b","a":null}}`, http.StatusBadRequest, `duplicate field "labels.a"`},
		{"patch duplicate in a list", http.MethodPatch, patch, `{"addTaints":[{"key":"k","effect":"NoSchedule","key":"j"}]}`, http.StatusBadRequest, `duplicate field "addTaints[0].key"`},
		{"rollout duplicate action", http.MethodPost, rollout, `{"action":"restart","action":"undo"}`, http.StatusBadRequest, `duplicate field "action"`},
		{"patch same key in two objects", http.MethodPatch, patch, `{"labels":{"a":"b"},"addTaints":[{"key":"a","effect":"NoSchedule"},{"key":"a","effect":"NoExecute"}]}`, http.StatusOK, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := called
			code, msg := send(tc.method, tc.path, tc.body)
			assert.Equal(t, tc.code, code, msg)
			assert.Contains(t, msg, tc.msg)
			if tc.code != http.StatusOK {
				assert.Equal(t, before, called, "a refused body reaches no backend method")
			}
		})
	}
}

// sendAuthorized sends an authorised request and returns the status code
// and error message of the answer.
func sendAuthorized(t *testing.T, addr, method, path, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, "http://"+addr+path, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+testToken)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err, "%s %s", method, path)
	defer resp.Body.Close()
	var e Error
	_ = json.NewDecoder(resp.Body).Decode(&e)
	return resp.StatusCode, e.Message
}

// rolloutBackend adds Rollout and DeleteDaemonSet to fakeBackend.
type rolloutBackend struct {
	fakeBackend
	rollout func(key string, req RolloutRequest) (DaemonSet, error)
	deleted []string
}

func (b *rolloutBackend) Rollout(_ context.Context, key string, req RolloutRequest) (DaemonSet, error) {
	return b.rollout(key, req)
}

func (b *rolloutBackend) DeleteDaemonSet(_ context.Context, key string, orphan bool) error {
	b.deleted = append(b.deleted, fmt.Sprintf("%s orphan=%t", key, orphan))
	return nil
}

func (b *rolloutBackend) ListSecrets(context.Context, bool) ([]Secret, error) { return nil, nil }

// TestBoolQueryParamsStrict: a boolean query parameter that does not
// parse is refused naming it, never read as false (dryRun=yes must not
// apply for real).
func TestBoolQueryParamsStrict(t *testing.T) {
	applied := 0
	b := &rolloutBackend{fakeBackend: fakeBackend{
		apply: func(string, []byte, bool) ([]ApplyResult, error) { applied++; return nil, nil },
	}}
	addr := startLimited(t, b, Limits{}, nil)
	send := func(method, path string) (int, string) {
		return sendAuthorized(t, addr, method, path, "kind: DaemonSet\n")
	}
	for _, tc := range []struct{ method, path, param string }{
		{http.MethodPost, "/api/v1/apply?dryRun=yes", "dryRun"},
		{http.MethodDelete, "/api/v1/daemonsets/default/fluentd?orphan=maybe", "orphan"},
		{http.MethodGet, "/api/v1/secrets?showValues=please", "showValues"},
	} {
		code, msg := send(tc.method, tc.path)
		assert.Equal(t, http.StatusBadRequest, code, tc.path)
		assert.Contains(t, msg, "query parameter "+tc.param, tc.path)
	}
	assert.Zero(t, applied)
	assert.Empty(t, b.deleted)
	code, _ := send(http.MethodDelete, "/api/v1/daemonsets/default/fluentd?orphan=true")
	assert.Equal(t, http.StatusOK, code)
	assert.Equal(t, []string{"default/fluentd orphan=true"}, b.deleted)
}

// TestLogStreamOutlivesTimeouts: a log stream runs past the read and write
// timeouts as long as each chunk is written in time.
func TestLogStreamOutlivesTimeouts(t *testing.T) {
	pr, pw := io.Pipe()
	b := &logsBackend{logs: func(LogsRequest) (io.ReadCloser, error) {
		return io.NopCloser(io.MultiReader(strings.NewReader("one\n"), pr)), nil
	}}
	addr := startLimited(t, b, Limits{ReadTimeout: 200 * time.Millisecond, WriteTimeout: 200 * time.Millisecond}, nil)
	c := NewClient("http://"+addr, testToken, &http.Client{})
	rc, err := c.Logs(context.Background(), LogsRequest{DaemonSet: "default/fluentd", Node: "gw-1", Follow: true})
	require.NoError(t, err)
	defer rc.Close()
	br := bufio.NewReader(rc)
	got, err := br.ReadString('\n')
	require.NoError(t, err)
	assert.Equal(t, "one\n", got)
	for _, line := range []string{"two\n", "three\n"} {
		<-time.After(600 * time.Millisecond) // past both timeouts
		_, err := io.WriteString(pw, line)
		require.NoError(t, err)
		got, err := br.ReadString('\n')
		require.NoError(t, err)
		assert.Equal(t, line, got)
	}
	pw.Close()
	rest, err := io.ReadAll(br)
	assert.NoError(t, err, "the stream ends cleanly")
	assert.Empty(t, rest)
}

// TestUnauthenticatedConnNotKeptAlive: a connection that never
// authenticated is closed after a /healthz, /readyz or /metrics request,
// so it holds no unauthenticated slot; an authenticated one is kept.
func TestUnauthenticatedConnNotKeptAlive(t *testing.T) {
	b := &fakeBackend{getNode: func(name string) (Node, error) { return Node{}, nil }}
	addr := startLimited(t, b, Limits{MaxUnauthenticatedConns: 8}, nil)

	conn := dialRaw(t, addr)
	br := bufio.NewReader(conn)
	_, err := io.WriteString(conn, "GET /healthz HTTP/1.1\r\nHost: edgeset\r\n\r\n")
	require.NoError(t, err)
	resp, _ := readResponse(t, conn, br)
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.True(t, resp.Close, "an unauthenticated connection is not kept alive")
	expectClosed(t, conn, br)

	conn = dialRaw(t, addr)
	br = bufio.NewReader(conn)
	_, err = fmt.Fprintf(conn, "GET /api/v1/nodes/gw-1 HTTP/1.1\r\nHost: edgeset\r\nAuthorization: Bearer %s\r\n\r\nGET /healthz HTTP/1.1\r\nHost: edgeset\r\n\r\n", testToken)
	require.NoError(t, err)
	for range 2 {
		resp, _ = readResponse(t, conn, br)
		assert.Equal(t, http.StatusOK, resp.StatusCode)
		assert.False(t, resp.Close, "an authenticated connection is kept alive")
	}
}

// slowBackend answers after a while, failing if the request's context
// ended meanwhile.
type slowBackend struct {
	fakeBackend
	delay time.Duration
}

func (b *slowBackend) wait(ctx context.Context) error {
	select {
	case <-ctx.Done():
		return fmt.Errorf("request context ended: %w", ctx.Err())
	case <-time.After(b.delay):
		return nil
	}
}

func (b *slowBackend) GetNode(ctx context.Context, name string) (Node, error) {
	return Node{}, b.wait(ctx)
}

func (b *slowBackend) ApplyManifests(ctx context.Context, _ string, _ []byte, _ ApplyOptions) ([]ApplyResult, error) {
	return nil, b.wait(ctx)
}

// TestSlowHandlerOutlivesTimeouts: the read timeout bounds reading the
// request and the write timeout writing the answer, not the time the
// controller takes to compute it: a request whose handling takes longer
// than both keeps its context and gets its answer.
func TestSlowHandlerOutlivesTimeouts(t *testing.T) {
	b := &slowBackend{delay: 600 * time.Millisecond}
	addr := startLimited(t, b, Limits{ReadTimeout: 200 * time.Millisecond, WriteTimeout: 200 * time.Millisecond}, nil)
	for _, tc := range []struct{ method, path, body string }{
		{http.MethodGet, "/api/v1/nodes/gw-1", ""},
		{http.MethodPost, "/api/v1/apply", "kind: DaemonSet\n"},
	} {
		code, msg := sendAuthorized(t, addr, tc.method, tc.path, tc.body)
		assert.Equal(t, http.StatusOK, code, "%s %s: %s", tc.method, tc.path, msg)
	}
}

// TestFloodOfIdleConnections: many connections that never finish their
// headers (or trickle a body without a token) hold at most the
// unauthenticated cap; the rest are closed at accept, and a client that
// authenticated before the flood keeps being served. EDGESET_API_FLOOD
// sets the number of connections (default 300; each costs the test two
// file descriptors).
func TestFloodOfIdleConnections(t *testing.T) {
	n := 300
	if v := os.Getenv("EDGESET_API_FLOOD"); v != "" {
		var err error
		n, err = strconv.Atoi(v)
		require.NoError(t, err, "EDGESET_API_FLOOD")
	}
	const maxUnauth = 64
	obs := &countingObserver{}
	b := &fakeBackend{getNode: func(name string) (Node, error) { return Node{}, nil }}
	addr := startLimited(t, b, Limits{ReadHeaderTimeout: time.Minute, ReadTimeout: time.Minute,
		MaxUnauthenticatedConns: maxUnauth}, obs)
	c := NewClient("http://"+addr, testToken, &http.Client{Transport: &http.Transport{}})
	_, err := c.GetNode(context.Background(), "gw-1")
	require.NoError(t, err)

	for i := range n {
		conn := dialRaw(t, addr)
		if i%2 == 0 { // headers never finished
			_, err = io.WriteString(conn, "POST /api/v1/apply HTTP/1.1\r\nHost: edgeset\r\n")
		} else { // a body without a token: answered 401 and closed
			_, err = io.WriteString(conn, "POST /api/v1/apply HTTP/1.1\r\nHost: edgeset\r\nContent-Length: 100000\r\n\r\nx")
		}
		if err != nil && !errors.Is(err, syscall.ECONNRESET) && !errors.Is(err, syscall.EPIPE) {
			require.NoError(t, err)
		}
	}
	checkfor.Eventually(t, 10*time.Second, 20*time.Millisecond, func() error {
		if got := obs.refusals(ConnRefusedUnauthenticated); got < n/2-maxUnauth {
			return fmt.Errorf("%d connections refused, want at least %d", got, n/2-maxUnauth)
		}
		return nil
	})
	for range 3 {
		_, err := c.GetNode(context.Background(), "gw-1")
		require.NoError(t, err, "the authenticated client is served during the flood")
	}
}

// emfileListener fails its first n Accepts with EMFILE, as a process out
// of file descriptors does.
type emfileListener struct {
	net.Listener
	left atomic.Int64
}

func (l *emfileListener) Accept() (net.Conn, error) {
	if l.left.Add(-1) >= 0 {
		return nil, &net.OpError{Op: "accept", Net: "tcp", Err: os.NewSyscallError("accept4", syscall.EMFILE)}
	}
	return l.Listener.Accept()
}

// TestAcceptErrorsCountedLoggedAndSurvived: failed accepts (EMFILE) are
// counted and logged through the limiter, and the server keeps serving.
func TestAcceptErrorsCountedLoggedAndSurvived(t *testing.T) {
	obs := &countingObserver{}
	var logs bytes.Buffer
	var logMu sync.Mutex
	log := slog.New(slog.NewTextHandler(&lockedWriter{w: &logs, mu: &logMu}, nil))
	b := &fakeBackend{getNode: func(name string) (Node, error) { return Node{}, nil }}
	s := New(b, Options{Token: testToken, Observer: obs, Log: log, Limits: Limits{AuthLogInterval: time.Hour}})
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ln := &emfileListener{Listener: inner}
	ln.left.Store(5)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		assert.NoError(t, <-done)
	})

	c := NewClient("http://"+inner.Addr().String(), testToken, nil)
	_, err = c.GetNode(context.Background(), "gw-1")
	require.NoError(t, err, "served after the failed accepts")
	assert.Equal(t, int64(5), obs.acceptFailed.Load())
	logMu.Lock()
	defer logMu.Unlock()
	assert.Equal(t, 1, strings.Count(logs.String(), "api cannot accept connections"), "one line for 5 errors:\n%s", logs.String())
	assert.Contains(t, logs.String(), "too many open files")
}

type lockedWriter struct {
	w  io.Writer
	mu *sync.Mutex
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
