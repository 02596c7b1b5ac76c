package ui

import (
	"net/http"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgeset/edgeset/controller/access"
	"github.com/edgeset/edgeset/controller/audit"
)

// memUsers is an access.Store in memory.
type memUsers struct {
	mu    sync.Mutex
	users map[string]access.User
}

func (m *memUsers) ListUsers() ([]access.User, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []access.User
	for _, u := range m.users {
		out = append(out, u)
	}
	return out, nil
}
func (m *memUsers) PutUser(u access.User) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.users[u.Name] = u
	return nil
}
func (m *memUsers) DeleteUser(name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.users, name)
	return nil
}

// memAudit is an audit.Store in memory.
type memAudit struct {
	mu      sync.Mutex
	entries []audit.Entry
}

func (m *memAudit) AppendAudit(e audit.Entry, _ audit.Retention, _ time.Time) (uint64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e.Seq = uint64(len(m.entries) + 1)
	m.entries = append(m.entries, e)
	return e.Seq, nil
}
func (m *memAudit) NoteAudit(seq uint64, detail string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.entries[seq-1].Detail = detail
	return nil
}

func (m *memAudit) FinishAudit(seq uint64, status int, msg string, d time.Duration) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.entries[seq-1].Status, m.entries[seq-1].Message, m.entries[seq-1].Duration = status, msg, d
	return nil
}
func (m *memAudit) ListAudit(audit.Filter) ([]audit.Entry, error) { return nil, nil }
func (m *memAudit) all() []audit.Entry {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]audit.Entry(nil), m.entries...)
}

// newAccessUI is a dashboard whose sign-in takes users' tokens (the
// data directory's token is testToken, user admin).
func newAccessUI(t *testing.T) (*testUI, *access.Users, *memAudit) {
	t.Helper()
	users, err := access.NewUsers(&memUsers{users: map[string]access.User{}}, access.Limits{}, testToken, nil)
	require.NoError(t, err)
	log := &memAudit{}
	return newTestUI(t, Options{Users: users, Audit: audit.NewLog(log, audit.Retention{}, nil, nil)}), users, log
}

func (u *testUI) signInWith(token string) *http.Cookie {
	u.t.Helper()
	resp := u.do(http.MethodPost, "/ui/login", url.Values{"token": {token}}, nil, nil)
	require.Equal(u.t, http.StatusSeeOther, resp.StatusCode)
	for _, c := range resp.Cookies() {
		if c.Name == sessionCookie {
			return c
		}
	}
	u.t.Fatal("no session cookie after sign-in")
	return nil
}

// TestEveryDashboardRouteHasAPermission fails when a dashboard route is
// registered without a row in access.Routes.
func TestEveryDashboardRouteHasAPermission(t *testing.T) {
	d := New(newFake(1, time.Now()), Options{Token: testToken})
	require.NotEmpty(t, d.Patterns())
	for _, p := range d.Patterns() {
		_, ok := access.Lookup(p)
		assert.True(t, ok, "dashboard route %q has no row in access.Routes", p)
	}
}

// TestViewerCannotAct: a viewer reads every page, but an action, even
// with the session's CSRF token from a same-origin page, is 403 naming
// the missing permission, and changes nothing; the CSRF check still
// comes first.
func TestViewerCannotAct(t *testing.T) {
	u, users, log := newAccessUI(t)
	_, tok, err := users.Create(access.Spec{Name: "ops", Role: access.RoleViewer}, "admin")
	require.NoError(t, err)
	c := u.signInWith(tok)
	for _, v := range views {
		assert.Equal(t, http.StatusOK, u.do(http.MethodGet, v, nil, c, nil).StatusCode, v)
	}
	csrf := u.csrfOf(c, "/ui/nodes/gw-0")

	resp := u.do(http.MethodPost, "/ui/nodes/gw-0/cordon", url.Values{csrfField: {csrf}}, c, nil)
	assert.Equal(t, http.StatusForbidden, resp.StatusCode)
	assert.Contains(t, readBody(t, resp), "forbidden: user &#34;ops&#34; (viewer) lacks nodes.update")
	resp = u.do(http.MethodPost, "/ui/daemonsets/monitoring/exporter/rollout", url.Values{csrfField: {csrf}, "action": {"pause"}}, c, nil)
	assert.Equal(t, http.StatusForbidden, resp.StatusCode)
	assert.Contains(t, readBody(t, resp), "lacks daemonsets.rollout")
	resp = u.do(http.MethodGet, "/ui/nodes/gw-0/logs?ds=monitoring/exporter", nil, c, map[string]string{"Accept": "text/event-stream"})
	assert.Equal(t, http.StatusForbidden, resp.StatusCode)
	assert.Contains(t, readBody(t, resp), "lacks logs.read")

	resp = u.do(http.MethodPost, "/ui/nodes/gw-0/cordon", url.Values{csrfField: {"wrong"}}, c, nil)
	assert.Equal(t, http.StatusForbidden, resp.StatusCode)
	assert.Contains(t, readBody(t, resp), "CSRF", "the CSRF check is intact")
	assert.Empty(t, u.fake.patches, "nothing changed")

	entries := log.all()
	require.Len(t, entries, 3, "the sign-in and the two denied actions; a wrong CSRF token is refused before")
	assert.Equal(t, "POST /ui/login", entries[0].Action)
	assert.Equal(t, "ops", entries[0].User)
	for _, e := range entries[1:] {
		assert.Equal(t, http.StatusForbidden, e.Status, e.Path)
		assert.Equal(t, "ops", e.User)
	}
}

// TestDashboardActionsAudited: an operator's action is recorded with
// who, what, from where and its result.
func TestDashboardActionsAudited(t *testing.T) {
	u, users, log := newAccessUI(t)
	_, tok, err := users.Create(access.Spec{Name: "op", Role: access.RoleOperator}, "admin")
	require.NoError(t, err)
	c := u.signInWith(tok)
	csrf := u.csrfOf(c, "/ui/nodes/gw-0")
	resp := u.do(http.MethodPost, "/ui/nodes/gw-0/cordon", url.Values{csrfField: {csrf}}, c, nil)
	assert.Equal(t, http.StatusSeeOther, resp.StatusCode)
	require.Len(t, u.fake.patches, 1)

	entries := log.all()
	require.Len(t, entries, 2)
	e := entries[1]
	assert.Equal(t, "op", e.User)
	assert.Equal(t, "operator", e.Role)
	assert.Equal(t, audit.ViaDashboard, e.Via)
	assert.Equal(t, "POST /ui/nodes/{name}/{action}", e.Action)
	assert.Equal(t, "/ui/nodes/gw-0/cordon", e.Path)
	assert.Equal(t, http.StatusSeeOther, e.Status)
	assert.NotEmpty(t, e.Remote)
}

// TestRevokedUserSessionEnds: a session acts with its user as of each
// request; once the user is revoked the session is gone.
func TestRevokedUserSessionEnds(t *testing.T) {
	u, users, _ := newAccessUI(t)
	_, tok, err := users.Create(access.Spec{Name: "op", Role: access.RoleOperator}, "admin")
	require.NoError(t, err)
	c := u.signInWith(tok)
	assert.Equal(t, http.StatusOK, u.do(http.MethodGet, "/ui/nodes", nil, c, nil).StatusCode)
	require.NoError(t, users.Revoke("op"))
	resp := u.do(http.MethodGet, "/ui/nodes", nil, c, nil)
	assert.Equal(t, http.StatusSeeOther, resp.StatusCode)
	assert.Contains(t, resp.Header.Get("Location"), "/ui/login")
}
