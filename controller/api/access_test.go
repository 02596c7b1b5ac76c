package api

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgeset/edgeset/controller/access"
	"github.com/edgeset/edgeset/controller/audit"
)

// callBackend answers every Backend call with an empty success and
// counts the calls that reached it.
type callBackend struct {
	mu    sync.Mutex
	calls []string
}

func (b *callBackend) called(name string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.calls = append(b.calls, name)
}

func (b *callBackend) count() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.calls)
}

func (b *callBackend) ApplyManifests(context.Context, string, []byte, ApplyOptions) ([]ApplyResult, error) {
	b.called("apply")
	return []ApplyResult{}, nil
}
func (b *callBackend) ListDaemonSets(context.Context) ([]DaemonSet, error) {
	b.called("listDS")
	return []DaemonSet{}, nil
}
func (b *callBackend) GetDaemonSet(context.Context, string) (DaemonSet, error) {
	b.called("getDS")
	return DaemonSet{}, nil
}
func (b *callBackend) DeleteDaemonSet(context.Context, string, bool) error {
	b.called("deleteDS")
	return nil
}
func (b *callBackend) ListNodes(context.Context) ([]Node, error) {
	b.called("listNodes")
	return []Node{}, nil
}
func (b *callBackend) GetNode(context.Context, string) (Node, error) {
	b.called("getNode")
	return Node{}, nil
}
func (b *callBackend) UpdateNode(context.Context, string, NodePatch) (Node, error) {
	b.called("updateNode")
	return Node{}, nil
}
func (b *callBackend) DeleteNode(context.Context, string) error { b.called("deleteNode"); return nil }
func (b *callBackend) ListInstances(context.Context) ([]Instance, error) {
	b.called("listInstances")
	return []Instance{}, nil
}
func (b *callBackend) DeleteInstance(context.Context, string, string) error {
	b.called("deleteInstance")
	return nil
}
func (b *callBackend) Rollout(context.Context, string, RolloutRequest) (DaemonSet, error) {
	b.called("rollout")
	return DaemonSet{}, nil
}
func (b *callBackend) ForceRollout(context.Context, string, string) (DaemonSet, error) {
	b.called("forceRollout")
	return DaemonSet{}, nil
}
func (b *callBackend) RolloutHistory(context.Context, string) ([]Revision, error) {
	b.called("history")
	return []Revision{}, nil
}
func (b *callBackend) Events(context.Context, EventFilter) ([]Event, error) {
	b.called("events")
	return []Event{}, nil
}
func (b *callBackend) Version(context.Context) VersionInfo { return VersionInfo{} }
func (b *callBackend) Logs(context.Context, LogsRequest) (io.ReadCloser, error) {
	b.called("logs")
	return io.NopCloser(strings.NewReader("log line\n")), nil
}
func (b *callBackend) Ready(context.Context) error { return nil }
func (b *callBackend) Sources(context.Context) ([]Source, error) {
	b.called("sources")
	return []Source{}, nil
}
func (b *callBackend) ListConfigMaps(context.Context) ([]ConfigMap, error) {
	b.called("listCM")
	return []ConfigMap{}, nil
}
func (b *callBackend) GetConfigMap(context.Context, string) (ConfigMap, error) {
	b.called("getCM")
	return ConfigMap{}, nil
}
func (b *callBackend) DeleteConfigMap(context.Context, string) error {
	b.called("deleteCM")
	return nil
}
func (b *callBackend) ListSecrets(context.Context, bool) ([]Secret, error) {
	b.called("listSecrets")
	return []Secret{}, nil
}
func (b *callBackend) GetSecret(context.Context, string, bool) (Secret, error) {
	b.called("getSecret")
	return Secret{}, nil
}
func (b *callBackend) DeleteSecret(context.Context, string) error {
	b.called("deleteSecret")
	return nil
}
func (b *callBackend) MintNodeToken(_ context.Context, node, _ string) (NodeToken, error) {
	b.called("mint")
	return NodeToken{Node: node}, nil
}
func (b *callBackend) RotateNodeToken(_ context.Context, node, _ string) (NodeToken, error) {
	b.called("rotate")
	return NodeToken{Node: node, Epoch: 1}, nil
}
func (b *callBackend) ReadmitNode(_ context.Context, node, _ string) (NodeToken, error) {
	b.called("readmit")
	return NodeToken{Node: node, Epoch: 1}, nil
}

var (
	_ Backend         = (*callBackend)(nil)
	_ NodeTokenMinter = (*callBackend)(nil)
	_ NodeCredentials = (*callBackend)(nil)
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

// memAudit is an audit.Store in memory, with an injectable failure.
type memAudit struct {
	mu      sync.Mutex
	entries []audit.Entry
	fail    error
}

func (m *memAudit) AppendAudit(e audit.Entry, _ audit.Retention, _ time.Time) (uint64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.fail != nil {
		return 0, m.fail
	}
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
	e := &m.entries[seq-1]
	e.Status, e.Message, e.Duration = status, msg, d
	return nil
}
func (m *memAudit) ListAudit(f audit.Filter) ([]audit.Entry, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []audit.Entry
	for _, e := range m.entries {
		if f.Match(e) {
			out = append(out, e)
		}
	}
	return out, nil
}
func (m *memAudit) all() []audit.Entry {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]audit.Entry(nil), m.entries...)
}

const adminToken = "admin-token-0123456789abcdef"

// accessServer is a Server with users and an audit log in memory.
type accessServer struct {
	srv     *httptest.Server
	backend *callBackend
	users   *access.Users
	audit   *memAudit
	server  *Server
}

func newAccessServer(t *testing.T) *accessServer {
	t.Helper()
	users, err := access.NewUsers(&memUsers{users: map[string]access.User{}}, access.Limits{}, adminToken, nil)
	require.NoError(t, err)
	as := &accessServer{backend: &callBackend{}, users: users, audit: &memAudit{}}
	as.server = New(as.backend, Options{Users: users, Audit: audit.NewLog(as.audit, audit.Retention{}, nil, nil)})
	as.srv = httptest.NewServer(as.server)
	t.Cleanup(as.srv.Close)
	return as
}

// token creates a user and returns its token.
func (as *accessServer) token(t *testing.T, name string, role access.Role, ns string) string {
	t.Helper()
	_, tok, err := as.users.Create(access.Spec{Name: name, Role: role, Namespace: ns}, "test")
	require.NoError(t, err)
	return tok
}

func (as *accessServer) do(t *testing.T, token, method, path, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, as.srv.URL+path, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := as.srv.Client().Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestEveryRouteHasAPermission fails when a route is registered without
// a row in access.Routes.
func TestEveryRouteHasAPermission(t *testing.T) {
	s := New(&callBackend{}, Options{Token: adminToken, Metrics: http.NotFoundHandler()})
	patterns := s.Patterns()
	require.NotEmpty(t, patterns)
	for _, p := range patterns {
		_, ok := access.Lookup(p)
		assert.True(t, ok, "route %q has no row in access.Routes: add one (it is admin-only until then)", p)
	}
}

// TestUnmappedRouteFailsClosed: a route another part adds without a row
// is refused to everyone but an unscoped admin, and audited.
func TestUnmappedRouteFailsClosed(t *testing.T) {
	as := newAccessServer(t)
	as.server.mux.HandleFunc("POST /api/v1/unmapped-example", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "{}") })
	for _, role := range []access.Role{access.RoleViewer, access.RoleOperator} {
		code, body := as.do(t, as.token(t, "u-"+string(role), role, ""), "POST", "/api/v1/unmapped-example", "")
		assert.Equal(t, http.StatusForbidden, code, role)
		assert.Contains(t, body, `lacks unmapped-route (admin only)`, role)
	}
	code, _ := as.do(t, as.token(t, "ns-admin", access.RoleAdmin, "a"), "POST", "/api/v1/unmapped-example", "")
	assert.Equal(t, http.StatusForbidden, code, "a namespace-scoped admin")
	code, _ = as.do(t, adminToken, "POST", "/api/v1/unmapped-example", "")
	assert.Equal(t, http.StatusOK, code)
	entries := as.audit.all()
	require.Len(t, entries, 4)
	assert.Equal(t, http.StatusForbidden, entries[0].Status)
	assert.Equal(t, http.StatusOK, entries[3].Status)
}

// TestRolesOverHTTP runs representative routes of every permission for
// every role, over real HTTP: allowed calls reach the backend, denied
// ones are 403 naming the missing permission and reach nothing.
func TestRolesOverHTTP(t *testing.T) {
	as := newAccessServer(t)
	tokens := map[access.Role]string{
		access.RoleViewer:   as.token(t, "viewer", access.RoleViewer, ""),
		access.RoleOperator: as.token(t, "operator", access.RoleOperator, ""),
		access.RoleAdmin:    as.token(t, "admin2", access.RoleAdmin, ""),
	}
	manifest := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\n  namespace: team-a\ndata:\n  k: v\n"
	routes := []struct {
		method, path, body string
		perm               access.Permission
	}{
		{"GET", "/api/v1/daemonsets", "", access.PermDaemonSetsRead},
		{"GET", "/api/v1/daemonsets/team-a/web", "", access.PermDaemonSetsRead},
		{"GET", "/api/v1/nodes", "", access.PermNodesRead},
		{"GET", "/api/v1/events", "", access.PermStatusRead},
		{"GET", "/api/v1/secrets/team-a/s", "", access.PermSecretsRead},
		{"POST", "/api/v1/apply", manifest, access.PermDaemonSetsApply},
		{"POST", "/api/v1/daemonsets/team-a/web/rollout", `{"action":"pause"}`, access.PermDaemonSetsRollout},
		{"POST", "/api/v1/daemonsets/team-a/web/rollout/force?node=gw-1", "", access.PermDaemonSetsRollout},
		{"PATCH", "/api/v1/nodes/gw-1", `{"labels":{"a":"b"}}`, access.PermNodesUpdate},
		{"DELETE", "/api/v1/daemonsets/team-a/web", "", access.PermDaemonSetsDelete},
		{"GET", "/api/v1/daemonsets/team-a/web/logs?node=gw-1", "", access.PermLogsRead},
		{"GET", "/api/v1/secrets/team-a/s?showValues=true", "", access.PermSecretsValues},
		{"DELETE", "/api/v1/nodes/gw-1", "", access.PermNodesDelete},
		{"POST", "/api/v1/nodes/gw-1/token", "", access.PermNodesToken},
		{"POST", "/api/v1/nodes/gw-1/token/rotate", "", access.PermNodesToken},
		{"GET", "/api/v1/users", "", access.PermUsersRead},
		{"GET", "/api/v1/audit", "", access.PermAuditRead},
	}
	for _, role := range access.Roles {
		for _, rt := range routes {
			t.Run(string(role)+" "+rt.method+" "+rt.path, func(t *testing.T) {
				before := as.backend.count()
				code, body := as.do(t, tokens[role], rt.method, rt.path, rt.body)
				if role.Has(rt.perm) {
					assert.Less(t, code, 300, body)
					return
				}
				assert.Equal(t, http.StatusForbidden, code)
				assert.Contains(t, body, `forbidden: user \"`+map[access.Role]string{access.RoleViewer: "viewer", access.RoleOperator: "operator"}[role]+`\" (`+string(role)+`) lacks `+string(rt.perm))
				assert.Equal(t, before, as.backend.count(), "a denied call reaches nothing")
			})
		}
	}
}

// TestNamespaceScopedUser acts as a Kubernetes Role binds: in its
// namespace only, never on nodes or across namespaces.
func TestNamespaceScopedUser(t *testing.T) {
	as := newAccessServer(t)
	tok := as.token(t, "ci", access.RoleOperator, "team-a")
	inA := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\n  namespace: team-a\ndata:\n  k: v\n"
	inDefault := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\ndata:\n  k: v\n"
	cases := []struct {
		method, path, body string
		code               int
		says               string
	}{
		{"GET", "/api/v1/daemonsets/team-a/web", "", http.StatusOK, ""},
		{"POST", "/api/v1/daemonsets/team-a/web/rollout", `{"action":"pause"}`, http.StatusOK, ""},
		{"POST", "/api/v1/apply", inA, http.StatusOK, ""},
		{"POST", "/api/v1/apply", inA + "---\n" + inDefault, http.StatusForbidden, "is scoped to namespace team-a, not default"},
		{"GET", "/api/v1/daemonsets/team-b/web", "", http.StatusForbidden, "is scoped to namespace team-a, not team-b"},
		{"DELETE", "/api/v1/configmaps/team-b/c", "", http.StatusForbidden, "not team-b"},
		{"GET", "/api/v1/daemonsets", "", http.StatusForbidden, "may not act on cluster-scoped objects or across namespaces"},
		{"PATCH", "/api/v1/nodes/gw-1", `{"labels":{"a":"b"}}`, http.StatusForbidden, "cluster-scoped"},
		{"GET", "/api/v1/nodes/gw-1", "", http.StatusForbidden, "cluster-scoped"},
		{"GET", "/api/v1/whoami", "", http.StatusOK, `"namespace": "team-a"`},
	}
	for _, tc := range cases {
		t.Run(tc.method+" "+tc.path, func(t *testing.T) {
			code, body := as.do(t, tok, tc.method, tc.path, tc.body)
			assert.Equal(t, tc.code, code, body)
			assert.Contains(t, body, tc.says)
		})
	}
}

func TestUsersThroughTheAPI(t *testing.T) {
	as := newAccessServer(t)
	admin := NewClient(as.srv.URL, adminToken, as.srv.Client())
	ctx := context.Background()
	created, err := admin.CreateUser(ctx, CreateUserRequest{Name: "ops", Role: "viewer", TTL: "1h"})
	require.NoError(t, err)
	assert.Equal(t, "ops", created.User.Name)
	assert.Equal(t, "admin", created.User.CreatedBy)
	assert.False(t, created.User.ExpiresAt.IsZero())

	ops := NewClient(as.srv.URL, created.Token, as.srv.Client())
	me, err := ops.WhoAmI(ctx)
	require.NoError(t, err)
	assert.Equal(t, "viewer", me.Role)
	assert.Contains(t, me.Permissions, "daemonsets.read")
	assert.NotContains(t, me.Permissions, "daemonsets.apply")

	_, err = ops.CreateUser(ctx, CreateUserRequest{Name: "me-too", Role: "admin"})
	var se *StatusError
	require.ErrorAs(t, err, &se)
	assert.Equal(t, http.StatusForbidden, se.Code)
	assert.Equal(t, `forbidden: user "ops" (viewer) lacks users.manage`, se.Body.Message)

	_, err = admin.CreateUser(ctx, CreateUserRequest{Name: "ops", Role: "viewer"})
	require.ErrorAs(t, err, &se)
	assert.Equal(t, http.StatusConflict, se.Code)
	_, err = admin.CreateUser(ctx, CreateUserRequest{Name: "x", Role: "root", TTL: "forever"})
	require.ErrorAs(t, err, &se)
	assert.Equal(t, http.StatusBadRequest, se.Code)
	assert.Contains(t, se.Body.Message, "ttl")

	list, err := admin.ListUsers(ctx)
	require.NoError(t, err)
	assert.Len(t, list, 2)
	assert.NotContains(t, strings.ToLower(strings.Join([]string{list[0].Name, list[1].Name}, " ")), "hash")

	require.NoError(t, admin.RevokeUser(ctx, "ops"))
	_, err = ops.WhoAmI(ctx)
	assert.ErrorIs(t, err, ErrUnauthorized, "a revoked user's token stops working at once")
	err = admin.RevokeUser(ctx, "admin")
	require.ErrorAs(t, err, &se)
	assert.Equal(t, http.StatusConflict, se.Code)
}

// TestAuditOfAPICalls: every mutation is recorded with who, what, from
// where and the result; reads are not, but secret values are.
func TestAuditOfAPICalls(t *testing.T) {
	as := newAccessServer(t)
	tok := as.token(t, "ops", access.RoleOperator, "")
	as.do(t, tok, "GET", "/api/v1/daemonsets", "")
	as.do(t, tok, "PATCH", "/api/v1/nodes/gw-1", `{"labels":{"a":"b"}}`)
	as.do(t, tok, "DELETE", "/api/v1/nodes/gw-1", "")
	as.do(t, adminToken, "GET", "/api/v1/secrets/a/s?showValues=true", "")

	entries := as.audit.all()
	require.Len(t, entries, 3, "the plain read is not audited")
	e := entries[0]
	assert.Equal(t, "ops", e.User)
	assert.Equal(t, "operator", e.Role)
	assert.Equal(t, audit.ViaAPI, e.Via)
	assert.Equal(t, "PATCH", e.Method)
	assert.Equal(t, "/api/v1/nodes/gw-1", e.Path)
	assert.Equal(t, "PATCH /api/v1/nodes/{name}", e.Action)
	assert.True(t, strings.HasPrefix(e.Remote, "127.0.0.1:"), e.Remote)
	assert.Equal(t, http.StatusOK, e.Status)
	assert.False(t, e.Time.IsZero())
	assert.Equal(t, http.StatusForbidden, entries[1].Status)
	assert.Contains(t, entries[1].Message, "lacks nodes.delete")
	assert.Equal(t, "/api/v1/secrets/a/s?showValues=true", entries[2].Path)

	admin := NewClient(as.srv.URL, adminToken, as.srv.Client())
	got, err := admin.Audit(context.Background(), audit.Filter{User: "ops"})
	require.NoError(t, err)
	assert.Len(t, got, 2)
	got, err = admin.Audit(context.Background(), audit.Filter{SinceSeq: 2})
	require.NoError(t, err)
	require.Len(t, got, 1)
	assert.EqualValues(t, 3, got[0].Seq)
}

// TestMutationRefusedWithoutAudit: when the audit entry cannot be
// written, the call is refused and changes nothing.
func TestMutationRefusedWithoutAudit(t *testing.T) {
	as := newAccessServer(t)
	as.audit.fail = errors.New("disk full")
	code, body := as.do(t, adminToken, "DELETE", "/api/v1/nodes/gw-1", "")
	assert.Equal(t, http.StatusServiceUnavailable, code)
	assert.Contains(t, body, "audit log unavailable")
	assert.Zero(t, as.backend.count(), "nothing reached the backend")
	code, _ = as.do(t, adminToken, "GET", "/api/v1/nodes", "")
	assert.Equal(t, http.StatusOK, code, "reads go on")
}

func TestExpiredTokenRefused(t *testing.T) {
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	users, err := access.NewUsers(&memUsers{users: map[string]access.User{}}, access.Limits{}, adminToken, clock)
	require.NoError(t, err)
	_, tok, err := users.Create(access.Spec{Name: "temp", Role: access.RoleViewer, TTL: time.Hour}, "admin")
	require.NoError(t, err)
	srv := httptest.NewServer(New(&callBackend{}, Options{Users: users}))
	t.Cleanup(srv.Close)
	c := NewClient(srv.URL, tok, srv.Client())
	_, err = c.ListNodes(context.Background())
	require.NoError(t, err)
	mu.Lock()
	now = now.Add(time.Hour)
	mu.Unlock()
	_, err = c.ListNodes(context.Background())
	assert.ErrorIs(t, err, ErrUnauthorized)
}

// TestStandbyDefersUserTokens: a Front without a user table (an HA
// standby) admits user-shaped tokens for the leader to check, and
// nothing else but its token.
func TestStandbyDefersUserTokens(t *testing.T) {
	f := NewFront(Options{Token: adminToken, DeferUserTokens: true})
	for _, tc := range []struct {
		token string
		ok    bool
	}{{adminToken, true}, {access.TokenPrefix + "anything", true}, {"garbage", false}, {"", false}} {
		r := httptest.NewRequest("GET", "/api/v1/nodes", nil)
		r.Header.Set("Authorization", "Bearer "+tc.token)
		_, ok := f.AdmitUser(httptest.NewRecorder(), r)
		assert.Equal(t, tc.ok, ok, tc.token)
	}
}
