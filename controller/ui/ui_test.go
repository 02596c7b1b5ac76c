package ui

import (
	"bufio"
	"context"
	"crypto/tls"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgeset/edgeset/controller/api"
	"github.com/edgeset/edgeset/internal/checkfor"
)

const testToken = "tok-0123456789abcdef"

// testUI is a Dashboard over a fake backend behind an httptest server.
type testUI struct {
	t    *testing.T
	fake *fakeBackend
	dash *Dashboard
	srv  *httptest.Server
}

func newTestUI(t *testing.T, opts Options) *testUI {
	t.Helper()
	fake := newFake(9, time.Now())
	opts.Token = testToken
	dash := New(fake, opts)
	srv := httptest.NewServer(dash)
	t.Cleanup(srv.Close)
	return &testUI{t: t, fake: fake, dash: dash, srv: srv}
}

// client does not follow redirects, so tests see them.
func (u *testUI) client() *http.Client {
	return &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }, Timeout: 10 * time.Second}
}

// do sends a request with the dashboard's own Origin unless headers say
// otherwise.
func (u *testUI) do(method, path string, form url.Values, cookie *http.Cookie, headers map[string]string) *http.Response {
	u.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, u.srv.URL+path, body)
	require.NoError(u.t, err)
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	if method == http.MethodPost {
		req.Header.Set("Origin", u.srv.URL)
	}
	for k, v := range headers {
		if v == "" {
			req.Header.Del(k)
		} else {
			req.Header.Set(k, v)
		}
	}
	if cookie != nil {
		req.AddCookie(cookie)
	}
	resp, err := u.client().Do(req)
	require.NoError(u.t, err)
	u.t.Cleanup(func() { resp.Body.Close() })
	return resp
}

func readBody(t *testing.T, resp *http.Response) string {
	t.Helper()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return string(b)
}

// signIn returns the session cookie of a successful sign-in.
func (u *testUI) signIn() *http.Cookie {
	u.t.Helper()
	resp := u.do(http.MethodPost, "/ui/login", url.Values{"token": {testToken}}, nil, nil)
	require.Equal(u.t, http.StatusSeeOther, resp.StatusCode)
	for _, c := range resp.Cookies() {
		if c.Name == sessionCookie {
			return c
		}
	}
	u.t.Fatal("no session cookie after sign-in")
	return nil
}

var csrfRE = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// csrfOf reads the CSRF token from a page's forms.
func (u *testUI) csrfOf(cookie *http.Cookie, path string) string {
	u.t.Helper()
	resp := u.do(http.MethodGet, path, nil, cookie, nil)
	require.Equal(u.t, http.StatusOK, resp.StatusCode)
	m := csrfRE.FindStringSubmatch(readBody(u.t, resp))
	require.NotNil(u.t, m, "no CSRF field on %s", path)
	return m[1]
}

var views = []string{"/ui/", "/ui/nodes", "/ui/nodes/gw-1", "/ui/daemonsets", "/ui/daemonsets/monitoring/exporter", "/ui/events"}

func TestViewsNeedSignIn(t *testing.T) {
	u := newTestUI(t, Options{})
	for _, path := range views {
		resp := u.do(http.MethodGet, path, nil, nil, nil)
		assert.Equal(t, http.StatusSeeOther, resp.StatusCode, path)
		assert.Equal(t, "/ui/login?next="+url.QueryEscape(path), resp.Header.Get("Location"), path)
	}
	resp := u.do(http.MethodGet, "/ui/stream", nil, nil, map[string]string{"Accept": "text/event-stream"})
	assert.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	resp = u.do(http.MethodPost, "/ui/nodes/gw-0/cordon", url.Values{}, nil, nil)
	assert.Equal(t, http.StatusSeeOther, resp.StatusCode, "an action without a session goes to sign-in")
	assert.Empty(t, u.fake.patches)
	resp = u.do(http.MethodGet, "/", nil, nil, nil)
	assert.Equal(t, http.StatusFound, resp.StatusCode)
	assert.Equal(t, "/ui/", resp.Header.Get("Location"))
}

func TestLogin(t *testing.T) {
	u := newTestUI(t, Options{})
	t.Run("bad token", func(t *testing.T) {
		resp := u.do(http.MethodPost, "/ui/login", url.Values{"token": {"wrong"}}, nil, nil)
		assert.Equal(t, http.StatusUnauthorized, resp.StatusCode)
		assert.Empty(t, resp.Cookies())
		assert.Contains(t, readBody(t, resp), "wrong token")
	})
	t.Run("good token", func(t *testing.T) {
		resp := u.do(http.MethodPost, "/ui/login", url.Values{"token": {testToken}, "next": {"/ui/nodes"}}, nil, nil)
		require.Equal(t, http.StatusSeeOther, resp.StatusCode)
		assert.Equal(t, "/ui/nodes", resp.Header.Get("Location"))
		require.Len(t, resp.Cookies(), 1)
		c := resp.Cookies()[0]
		assert.Equal(t, sessionCookie, c.Name)
		assert.True(t, c.HttpOnly, "HttpOnly")
		assert.Equal(t, http.SameSiteStrictMode, c.SameSite)
		assert.False(t, c.Secure, "not Secure over plain HTTP")
		assert.Equal(t, "/ui/", c.Path)
		assert.NotContains(t, c.Value, testToken, "the cookie holds a session id, not the token")
		page := u.do(http.MethodGet, "/ui/nodes", nil, c, nil)
		assert.Equal(t, http.StatusOK, page.StatusCode)
	})
	t.Run("next stays on the dashboard", func(t *testing.T) {
		resp := u.do(http.MethodPost, "/ui/login", url.Values{"token": {testToken}, "next": {"//evil.example/x"}}, nil, nil)
		assert.Equal(t, "/ui/", resp.Header.Get("Location"))
	})
	t.Run("cross-origin sign-in refused", func(t *testing.T) {
		resp := u.do(http.MethodPost, "/ui/login", url.Values{"token": {testToken}}, nil, map[string]string{"Origin": "http://evil.example"})
		assert.Equal(t, http.StatusForbidden, resp.StatusCode)
		assert.Empty(t, resp.Cookies())
	})
}

func TestSecureCookieOverTLS(t *testing.T) {
	fake := newFake(3, time.Now())
	srv := httptest.NewTLSServer(New(fake, Options{Token: testToken}))
	defer srv.Close()
	cl := srv.Client()
	cl.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/ui/login", strings.NewReader("token="+testToken))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", srv.URL)
	cl.Transport.(*http.Transport).TLSClientConfig.MinVersion = tls.VersionTLS12
	resp, err := cl.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Len(t, resp.Cookies(), 1)
	assert.True(t, resp.Cookies()[0].Secure, "Secure over TLS")
}

func TestLoginRateLimited(t *testing.T) {
	u := newTestUI(t, Options{LoginFailures: 3, LoginWindow: time.Hour})
	for range 3 {
		u.do(http.MethodPost, "/ui/login", url.Values{"token": {"wrong"}}, nil, nil)
	}
	resp := u.do(http.MethodPost, "/ui/login", url.Values{"token": {testToken}}, nil, nil)
	assert.Equal(t, http.StatusTooManyRequests, resp.StatusCode, "blocked even with the right token")
	assert.NotEmpty(t, resp.Header.Get("Retry-After"))
	assert.Empty(t, resp.Cookies())
}

func TestLogout(t *testing.T) {
	u := newTestUI(t, Options{})
	c := u.signIn()
	csrf := u.csrfOf(c, "/ui/")
	resp := u.do(http.MethodPost, "/ui/logout", url.Values{csrfField: {csrf}}, c, nil)
	assert.Equal(t, http.StatusSeeOther, resp.StatusCode)
	assert.Equal(t, 0, u.dash.sessions.len())
	resp = u.do(http.MethodGet, "/ui/", nil, c, nil)
	assert.Equal(t, http.StatusSeeOther, resp.StatusCode, "the old cookie no longer signs in")
}

func TestActionsNeedCSRFAndSameOrigin(t *testing.T) {
	u := newTestUI(t, Options{})
	c := u.signIn()
	csrf := u.csrfOf(c, "/ui/nodes/gw-0")
	other := u.signIn()
	otherCSRF := u.csrfOf(other, "/ui/nodes/gw-0")
	cases := []struct {
		name    string
		form    url.Values
		headers map[string]string
		want    int
	}{
		{"no token", url.Values{}, nil, http.StatusForbidden},
		{"wrong token", url.Values{csrfField: {"x" + csrf}}, nil, http.StatusForbidden},
		{"another session's token", url.Values{csrfField: {otherCSRF}}, nil, http.StatusForbidden},
		{"cross origin", url.Values{csrfField: {csrf}}, map[string]string{"Origin": "http://evil.example"}, http.StatusForbidden},
		{"cross-origin referer", url.Values{csrfField: {csrf}}, map[string]string{"Origin": "", "Referer": "http://evil.example/ui/"}, http.StatusForbidden},
		{"neither origin nor referer", url.Values{csrfField: {csrf}}, map[string]string{"Origin": ""}, http.StatusForbidden},
		{"same-origin referer", url.Values{csrfField: {csrf}}, map[string]string{"Origin": "", "Referer": u.srv.URL + "/ui/nodes/gw-0"}, http.StatusSeeOther},
		{"good", url.Values{csrfField: {csrf}}, nil, http.StatusSeeOther},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := len(u.fake.patches)
			resp := u.do(http.MethodPost, "/ui/nodes/gw-0/cordon", tc.form, c, tc.headers)
			assert.Equal(t, tc.want, resp.StatusCode)
			changed := len(u.fake.patches) - before
			if tc.want == http.StatusSeeOther {
				assert.Equal(t, 1, changed)
			} else {
				assert.Zero(t, changed, "a refused action changes nothing")
			}
		})
	}
}

func TestNodeActions(t *testing.T) {
	u := newTestUI(t, Options{})
	c := u.signIn()
	csrf := u.csrfOf(c, "/ui/nodes/gw-0")
	post := func(action string, form url.Values) *http.Response {
		form.Set(csrfField, csrf)
		return u.do(http.MethodPost, "/ui/nodes/gw-0/"+action, form, c, nil)
	}
	assert.Equal(t, http.StatusSeeOther, post("label", url.Values{"key": {"zone"}, "value": {"eu"}, "overwrite": {"1"}}).StatusCode)
	assert.Equal(t, http.StatusSeeOther, post("taint", url.Values{"key": {"k"}, "value": {"v"}, "effect": {"NoSchedule"}}).StatusCode)
	assert.Equal(t, http.StatusSeeOther, post("drain", url.Values{}).StatusCode)
	assert.Equal(t, http.StatusBadRequest, post("label", url.Values{"key": {""}}).StatusCode, "a label needs a key")
	assert.Equal(t, http.StatusNotFound, post("explode", url.Values{}).StatusCode)
	require.Len(t, u.fake.patches, 3)
	assert.Equal(t, "eu", *u.fake.patches[0].Patch.Labels["zone"])
	assert.True(t, u.fake.patches[0].Patch.Overwrite)
	assert.Equal(t, "NoSchedule", u.fake.patches[1].Patch.AddTaints[0].Effect)
	drain := u.fake.patches[2].Patch
	assert.True(t, *drain.Unschedulable)
	assert.Equal(t, drainTaintRef, drain.AddTaints[0].Key+":"+drain.AddTaints[0].Effect)
}

func TestRolloutAction(t *testing.T) {
	u := newTestUI(t, Options{})
	c := u.signIn()
	csrf := u.csrfOf(c, "/ui/daemonsets/monitoring/exporter")
	resp := u.do(http.MethodPost, "/ui/daemonsets/monitoring/exporter/rollout", url.Values{csrfField: {csrf}, "action": {"pause"}}, c, nil)
	assert.Equal(t, http.StatusSeeOther, resp.StatusCode)
	resp = u.do(http.MethodPost, "/ui/daemonsets/monitoring/exporter/rollout", url.Values{csrfField: {csrf}, "action": {"undo"}, "toRevision": {"1"}}, c, nil)
	assert.Equal(t, http.StatusSeeOther, resp.StatusCode)
	resp = u.do(http.MethodPost, "/ui/daemonsets/monitoring/exporter/rollout", url.Values{csrfField: {csrf}, "action": {"explode"}}, c, nil)
	assert.Equal(t, http.StatusBadRequest, resp.StatusCode)
	assert.Equal(t, []api.RolloutRequest{{Action: "pause"}, {Action: "undo", ToRevision: 1}}, u.fake.rollouts)
	page := readBody(t, u.do(http.MethodGet, "/ui/daemonsets/monitoring/exporter", nil, c, nil))
	assert.Contains(t, page, `data-state="monitoring/exporter" id="ds-state">paused<`)
}

// TestDaemonSetPageShowsUpdateLocks: the daemonset page says how many
// nodes their update lock holds, and each held instance since when.
func TestDaemonSetPageShowsUpdateLocks(t *testing.T) {
	u := newTestUI(t, Options{})
	c := u.signIn()
	since := time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC)
	u.fake.mu.Lock()
	ds := &u.fake.dss[0]
	ds.Status.Rollout.HeldByLock, ds.Status.Rollout.StaleLocks = 1, 1
	ds.Instances[2].UpdateLock = &api.UpdateLock{HeldSince: since, Stale: true}
	u.fake.mu.Unlock()
	page := readBody(t, u.do(http.MethodGet, "/ui/daemonsets/monitoring/exporter", nil, c, nil))
	assert.Contains(t, page, `<dd id="update-locks">1 nodes held by their update lock, 1 stale`)
	assert.Contains(t, page, "held by update lock since 2026-11-29T09:00:00Z (stale); ")
}

var externalRE = regexp.MustCompile(`(?i)(src|href|action)="(https?:)?//`)

func TestEveryViewRenders(t *testing.T) {
	u := newTestUI(t, Options{})
	c := u.signIn()
	want := map[string][]string{
		"/ui/":           {`data-count="online">6<`, `data-count="offline">3<`, `data-count="notReady">1<`, "pull failed", ">a<"},
		"/ui/nodes":      {"gw-8", "Ready,SchedulingDisabled", "role=gateway,site=c", "linux/arm64"},
		"/ui/nodes/gw-1": {"NotReady", "monitoring/exporter", "matches nodeSelector", "telemetry: not reported by this agent", "BackOff", `name="csrf"`},
		"/ui/nodes/gw-2": {"0.75 (4 CPUs)", "2.0 GiB available of 4.0 GiB", "20.0 GiB free of 32.0 GiB", "12.5%", "30.0 MiB",
			`aria-label="load average over 3 reports, last 0.75"`, `aria-label="temperature (°C) over 2 reports, last 51.50"`},
		"/ui/daemonsets":                     {"exporter", "progressing"},
		"/ui/daemonsets/monitoring/exporter": {"registry.local/exporter:2", "Undo to 1", "RolloutStarted", "Progress plot"},
		"/ui/events":                         {"BackOff", "RolloutStarted"},
		"/ui/events?node=gw-1":               {"BackOff"},
	}
	for path, fragments := range want {
		resp := u.do(http.MethodGet, path, nil, c, nil)
		body := readBody(t, resp)
		require.Equal(t, http.StatusOK, resp.StatusCode, path)
		csp := resp.Header.Get("Content-Security-Policy")
		assert.Contains(t, csp, "default-src 'self'", path)
		assert.NotContains(t, csp, "unsafe-inline", path)
		for _, f := range fragments {
			assert.Contains(t, body, f, path)
		}
		assert.NotRegexp(t, externalRE, body, "%s refers to another origin", path)
		assert.NotContains(t, body, testToken, path)
		assert.NotContains(t, body, secretValue, path)
		assert.NotContains(t, body, "<script>", "%s has an inline script", path)
		assert.NotContains(t, body, " style=", "%s has an inline style", path)
	}
	events := readBody(t, u.do(http.MethodGet, "/ui/events?node=gw-1", nil, c, nil))
	assert.NotContains(t, events, "RolloutStarted", "the node filter drops the daemonset's event")
	for _, asset := range []string{"/ui/assets/app.js", "/ui/assets/app.css", "/ui/assets/favicon.svg"} {
		resp := u.do(http.MethodGet, asset, nil, nil, nil)
		assert.Equal(t, http.StatusOK, resp.StatusCode, asset)
		body := strings.ReplaceAll(readBody(t, resp), `xmlns="http://www.w3.org/2000/svg"`, "")
		assert.NotRegexp(t, regexp.MustCompile(`https?://`), body, asset)
	}
	resp := u.do(http.MethodGet, "/ui/nodes/nope", nil, c, map[string]string{"Referer": "http://evil.example/ui/"})
	assert.Equal(t, http.StatusNotFound, resp.StatusCode)
	assert.NotContains(t, readBody(t, resp), "evil.example", "the error page links back only within the dashboard")
	resp = u.do(http.MethodGet, "/ui/nodes?sort=bogus", nil, c, nil)
	assert.Equal(t, http.StatusBadRequest, resp.StatusCode)
	assert.Contains(t, readBody(t, resp), "query parameter sort")
}

func TestDaemonSetSiteBreakdown(t *testing.T) {
	f := newFake(9, time.Now())
	ds := f.dss[0]
	sites := siteBreakdown(&ds, f.nodes, "site")
	// Site a: gw-0, gw-3, gw-6, all offline. Site b: gw-1 (h2, not
	// ready: updating), gw-4 (h2, ready: updated), gw-7 (h1: waiting).
	// Site c: gw-2, gw-5, gw-8, online on h1: waiting.
	assert.Equal(t, []siteRollout{
		{Site: "a", Instances: 3, Offline: 3},
		{Site: "b", Instances: 3, Updated: 1, Updating: 1, Waiting: 1},
		{Site: "c", Instances: 3, Waiting: 3},
	}, sites)
}

func TestNodeTable(t *testing.T) {
	now := time.Now()
	f := newFake(250, now)
	query := func(raw string) nodeTable {
		v, err := url.ParseQuery(raw)
		require.NoError(t, err)
		nq, sel, err := parseNodeQuery(v)
		require.NoError(t, err, raw)
		return queryNodes(newNodeSnapshot(slices.Clone(f.nodes), now), nq, sel, now)
	}
	names := func(tb nodeTable) []string {
		var out []string
		for _, r := range tb.Rows {
			out = append(out, r.Name)
		}
		return out
	}
	t.Run("first page by name", func(t *testing.T) {
		tb := query("")
		assert.Equal(t, 250, tb.Matched)
		assert.Equal(t, 5, tb.Pages)
		assert.Len(t, tb.Rows, 50)
		assert.Equal(t, "gw-0", tb.Rows[0].Name)
		assert.Equal(t, []string{"gw-0", "gw-1", "gw-10"}, names(tb)[:3], "names sort as strings")
	})
	t.Run("last page is short", func(t *testing.T) {
		tb := query("size=100&page=3")
		assert.Len(t, tb.Rows, 50)
		assert.Equal(t, 201, tb.First)
		assert.Equal(t, 250, tb.Last)
	})
	t.Run("page past the end shows the last", func(t *testing.T) {
		tb := query("page=99")
		assert.Equal(t, 5, tb.Query.Page)
	})
	t.Run("descending", func(t *testing.T) {
		assert.Equal(t, "gw-99", query("dir=desc").Rows[0].Name)
	})
	t.Run("selector", func(t *testing.T) {
		tb := query("selector=" + url.QueryEscape("site=a,role=gateway"))
		// site a: i%3==0; gateway: i%2==0: i%6==0, 0..246: 42 nodes.
		assert.Equal(t, 42, tb.Matched)
		for _, r := range tb.Rows {
			assert.Contains(t, r.Labels, "site=a")
			assert.Contains(t, r.Labels, "role=gateway")
		}
	})
	t.Run("status", func(t *testing.T) {
		assert.Equal(t, []string{"gw-1"}, names(query("status=notready")))
		assert.Equal(t, []string{"gw-2"}, names(query("status=cordoned")))
		assert.Equal(t, 84, query("status=offline").Matched) // i%3==0 in 0..249
	})
	t.Run("text", func(t *testing.T) {
		assert.Equal(t, []string{"gw-123"}, names(query("q=gw-123")))
		assert.Equal(t, 125, query("q=camera").Matched, "a label value matches")
	})
	t.Run("sort by online puts offline first", func(t *testing.T) {
		tb := query("sort=online")
		assert.False(t, tb.Rows[0].Online)
		assert.True(t, query("sort=online&dir=desc").Rows[0].Online)
	})
	t.Run("bad parameters name themselves", func(t *testing.T) {
		for raw, want := range map[string]string{"size=0": "size", "page=x": "page", "status=odd": "status", "selector=a%20in": "selector"} {
			v, _ := url.ParseQuery(raw)
			_, _, err := parseNodeQuery(v)
			require.Error(t, err, raw)
			assert.Contains(t, err.Error(), want)
		}
	})
}

func TestNodeTableLinksKeepTheFilter(t *testing.T) {
	u := newTestUI(t, Options{})
	c := u.signIn()
	body := readBody(t, u.do(http.MethodGet, "/ui/nodes?selector=site%3Db&size=25", nil, c, nil))
	assert.Contains(t, body, `href="?selector=site%3Db&amp;size=25&amp;sort=status"`)
}

// readEvent reads SSE lines until an event named name, returning its data.
func readEvent(t *testing.T, sc *bufio.Scanner, name string) string {
	t.Helper()
	event := ""
	for sc.Scan() {
		line := sc.Text()
		if v, ok := strings.CutPrefix(line, "event: "); ok {
			event = v
		}
		if v, ok := strings.CutPrefix(line, "data: "); ok && event == name {
			return v
		}
	}
	t.Fatalf("stream ended before a %s event: %v", name, sc.Err())
	return ""
}

func TestLiveStreamSendsUpdates(t *testing.T) {
	u := newTestUI(t, Options{Refresh: 20 * time.Millisecond, Heartbeat: 10 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	runDone := make(chan error, 1)
	go func() { runDone <- u.dash.Run(ctx) }()
	c := u.signIn()
	req, _ := http.NewRequest(http.MethodGet, u.srv.URL+"/ui/stream?since=2&node=gw-5", nil)
	req.AddCookie(c)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
	sc := bufio.NewScanner(resp.Body)
	assert.Contains(t, readEvent(t, sc, "counts"), `"online":6`)

	u.fake.mu.Lock()
	u.fake.nodes[0].Online = true
	u.fake.mu.Unlock()
	u.fake.addEvent(api.Event{Time: time.Now(), Type: "Normal", Reason: "Other", Object: "node/gw-4", Source: "gw-4"})
	u.fake.addEvent(api.Event{Time: time.Now(), Type: "Warning", Reason: "Crash", Object: "node/gw-5", Source: "gw-5", Message: "exited 1"})
	ev := readEvent(t, sc, "event")
	assert.Contains(t, ev, `"reason":"Crash"`, "the node filter skips gw-4's event")
	checkfor.Eventually(t, 5*time.Second, 0, func() error {
		if data := readEvent(t, sc, "counts"); !strings.Contains(data, `"online":7`) {
			return errString("counts not updated yet: " + data)
		}
		return nil
	})
	cancel()
	require.NoError(t, <-runDone)
	// The stream ends when Run does.
	for sc.Scan() {
	}
}

type errString string

func (e errString) Error() string { return string(e) }

func TestStreamsBounded(t *testing.T) {
	u := newTestUI(t, Options{MaxStreams: 1})
	c := u.signIn()
	open := func() *http.Response {
		req, _ := http.NewRequest(http.MethodGet, u.srv.URL+"/ui/stream", nil)
		req.AddCookie(c)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		t.Cleanup(func() { resp.Body.Close() })
		return resp
	}
	first := open()
	require.Equal(t, http.StatusOK, first.StatusCode)
	second := open()
	assert.Equal(t, http.StatusServiceUnavailable, second.StatusCode)
	first.Body.Close()
	checkfor.Eventually(t, 5*time.Second, 10*time.Millisecond, func() error {
		if resp := open(); resp.StatusCode != http.StatusOK {
			return errString("slot not freed yet")
		}
		return nil
	})
}

func TestLogStream(t *testing.T) {
	u := newTestUI(t, Options{})
	var got api.LogsRequest
	u.fake.logs = func(_ context.Context, req api.LogsRequest) (io.ReadCloser, error) {
		got = req
		return io.NopCloser(strings.NewReader("line one\r\nline <two>\n")), nil
	}
	c := u.signIn()
	req, _ := http.NewRequest(http.MethodGet, u.srv.URL+"/ui/nodes/gw-4/logs?ds=monitoring/exporter&tail=5", nil)
	req.AddCookie(c)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	assert.Equal(t, `"line one"`, readEvent(t, sc, "line"))
	assert.Equal(t, `"line \u003ctwo\u003e"`, readEvent(t, sc, "line"))
	assert.Equal(t, `"end of log"`, readEvent(t, sc, "end"))
	assert.Equal(t, api.LogsRequest{DaemonSet: "monitoring/exporter", Node: "gw-4", Tail: 5, Follow: true}, got)

	bad := u.do(http.MethodGet, "/ui/nodes/gw-4/logs?ds=nope", nil, c, nil)
	assert.Equal(t, http.StatusBadRequest, bad.StatusCode)
}

func TestSessionTableBounded(t *testing.T) {
	now := time.Unix(1000, 0)
	tab := newSessionTable(3, time.Hour, func() time.Time { return now })
	var ids []string
	for range 5 {
		ids = append(ids, tab.open("").id)
		now = now.Add(time.Second)
	}
	assert.Equal(t, 3, tab.len())
	_, ok := tab.get(ids[0])
	assert.False(t, ok, "the oldest session made room")
	_, ok = tab.get(ids[4])
	assert.True(t, ok)
	now = now.Add(2 * time.Hour)
	_, ok = tab.get(ids[4])
	assert.False(t, ok, "expired")
}

func TestProgressHistoryBounded(t *testing.T) {
	h := newProgressHistory(3, 2)
	f := newFake(3, time.Now())
	other := f.dss[0]
	other.Name = "other"
	third := f.dss[0]
	third.Name = "third"
	dss := []api.DaemonSet{f.dss[0], other, third}
	for i := range 5 {
		dss[0].Status.Rollout.Updated = i
		h.record(time.Unix(int64(i), 0), dss)
	}
	pts := h.get("monitoring/exporter")
	require.Len(t, pts, 3)
	assert.Equal(t, []int{2, 3, 4}, []int{pts[0].Updated, pts[1].Updated, pts[2].Updated})
	assert.Empty(t, h.get("monitoring/third"), "past MaxTracked a daemonset is not tracked")
	h.record(time.Unix(9, 0), dss[1:2])
	assert.Empty(t, h.get("monitoring/exporter"), "a deleted daemonset is forgotten")
}

func TestProgressPlot(t *testing.T) {
	assert.Contains(t, string(progressPlot(nil)), "not enough samples")
	t0 := time.Unix(0, 0)
	pts := []progressPoint{{At: t0, Total: 10}, {At: t0.Add(10 * time.Second), Total: 10, Updated: 5}, {At: t0.Add(20 * time.Second), Total: 10, Updated: 10}}
	svg := string(progressPlot(pts))
	assert.Contains(t, svg, `aria-label="rollout progress: 10 of 10 updated at the last sample"`)
	// Updated goes from the bottom (y 120) through the middle to the top
	// (y 10), left (x 40) to right (x 590).
	assert.Contains(t, svg, `<polyline class="line-updated" points="40.0,120.0 315.0,65.0 590.0,10.0">`)
	assert.Contains(t, string(progressBar("a/b", 1, 4)), `data-bar="a/b" width="25.0"`)
	assert.Contains(t, string(progressBar("a/b", 0, 0)), `width="0.0"`)
}

func TestLiveStreamHeartbeat(t *testing.T) {
	u := newTestUI(t, Options{Heartbeat: 10 * time.Millisecond})
	c := u.signIn()
	req, _ := http.NewRequest(http.MethodGet, u.srv.URL+"/ui/stream", nil)
	req.AddCookie(c)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	pings := 0
	for pings < 2 && sc.Scan() {
		if sc.Text() == ": ping" {
			pings++
		}
	}
	assert.Equal(t, 2, pings, "an idle stream gets heartbeats (%v)", sc.Err())
}

// TestLogStreamEndsWithTheDashboard: a followed log that never ends is
// cancelled when Run returns, and its stream says so.
func TestLogStreamEndsWithTheDashboard(t *testing.T) {
	u := newTestUI(t, Options{})
	u.fake.logs = func(ctx context.Context, _ api.LogsRequest) (io.ReadCloser, error) {
		pr, pw := io.Pipe()
		go func() {
			_, _ = io.WriteString(pw, "first\n")
			<-ctx.Done()
			pw.Close()
		}()
		return pr, nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	runDone := make(chan error, 1)
	go func() { runDone <- u.dash.Run(ctx) }()
	c := u.signIn()
	req, _ := http.NewRequest(http.MethodGet, u.srv.URL+"/ui/nodes/gw-4/logs?ds=monitoring/exporter", nil)
	req.AddCookie(c)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	assert.Equal(t, `"first"`, readEvent(t, sc, "line"))
	cancel()
	require.NoError(t, <-runDone)
	assert.Equal(t, `"stopped"`, readEvent(t, sc, "end"))
}

// TestSampleCountsNodesWaitingForAWindow: the dashboard's rollout counts
// add up to the total while nodes wait for a maintenance window.
func TestSampleCountsNodesWaitingForAWindow(t *testing.T) {
	ds := api.DaemonSet{}
	ds.Status.Rollout = &api.RolloutStatus{Total: 10, Updated: 3, Updating: 1, Waiting: 2, WaitingForWindow: 4}
	s := sampleOf(&ds)
	assert.Equal(t, 6, s.Waiting)
	assert.Equal(t, s.Total, s.Updated+s.Updating+s.Waiting+s.Offline+s.Failed)
}

// TestSampleCountsNodesHeldByLock: nodes held by their update lock wait
// too, so the counts add up.
func TestSampleCountsNodesHeldByLock(t *testing.T) {
	ds := api.DaemonSet{}
	ds.Status.Rollout = &api.RolloutStatus{Total: 10, Updated: 3, Updating: 1, Waiting: 2, WaitingForWindow: 1, HeldByLock: 3, StaleLocks: 1}
	s := sampleOf(&ds)
	assert.Equal(t, 6, s.Waiting)
	assert.Equal(t, s.Total, s.Updated+s.Updating+s.Waiting+s.Offline+s.Failed)
}
