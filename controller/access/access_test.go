package access

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// memStore is a Store in memory, with an injectable failure.
type memStore struct {
	mu    sync.Mutex
	users map[string]User
	fail  error
}

func newMemStore() *memStore { return &memStore{users: map[string]User{}} }

func (m *memStore) ListUsers() ([]User, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []User
	for _, u := range m.users {
		out = append(out, u)
	}
	return out, m.fail
}

func (m *memStore) PutUser(u User) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.fail != nil {
		return m.fail
	}
	m.users[u.Name] = u
	return nil
}

func (m *memStore) DeleteUser(name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.fail != nil {
		return m.fail
	}
	delete(m.users, name)
	return nil
}

var _ Store = (*memStore)(nil)

// TestRolePermissions is the role table: what each role holds and not.
func TestRolePermissions(t *testing.T) {
	cases := []struct {
		perm                    Permission
		viewer, operator, admin bool
	}{
		{PermNone, true, true, true},
		{PermStatusRead, true, true, true},
		{PermDaemonSetsRead, true, true, true},
		{PermNodesRead, true, true, true},
		{PermConfigRead, true, true, true},
		{PermSecretsRead, true, true, true},
		{PermImagesRead, true, true, true},
		{PermImagesPush, false, true, true},
		{PermImagesDelete, false, true, true},
		{PermDaemonSetsApply, false, true, true},
		{PermDaemonSetsDelete, false, true, true},
		{PermDaemonSetsRollout, false, true, true},
		{PermConfigDelete, false, true, true},
		{PermSecretsDelete, false, true, true},
		{PermNodesUpdate, false, true, true},
		{PermLogsRead, false, true, true},
		{PermSecretsValues, false, false, true},
		{PermNodesDelete, false, false, true},
		{PermNodesToken, false, false, true},
		{PermUsersRead, false, false, true},
		{PermUsersManage, false, false, true},
		{PermAuditRead, false, false, true},
		{PermStoreBackup, false, false, true},
		{PermKeysManage, false, false, true},
		{PermExec, false, false, true},
		{PermUnmapped, false, false, true},
		{Permission("example.new"), false, false, true}, // a permission added elsewhere: admin only until mapped
	}
	for _, tc := range cases {
		t.Run(string(tc.perm), func(t *testing.T) {
			assert.Equal(t, tc.viewer, RoleViewer.Has(tc.perm), "viewer")
			assert.Equal(t, tc.operator, RoleOperator.Has(tc.perm), "operator")
			assert.Equal(t, tc.admin, RoleAdmin.Has(tc.perm), "admin")
		})
	}
	assert.False(t, Role("root").Has(PermStatusRead), "an unknown role holds nothing")
}

// TestRolesNest: every role holds everything the one below it holds.
func TestRolesNest(t *testing.T) {
	for i := 1; i < len(Roles); i++ {
		for _, p := range Roles[i-1].Permissions() {
			assert.True(t, Roles[i].Has(p), "%s lacks %s of %s", Roles[i], p, Roles[i-1])
		}
	}
}

// TestRoutesTableIsSound: every row names a known permission, every
// pattern is "METHOD /path", and every query escalation names both.
func TestRoutesTableIsSound(t *testing.T) {
	known := AllPermissions()
	for _, r := range Routes {
		method, path, ok := strings.Cut(r.Pattern, " ")
		require.True(t, ok, "%s: want METHOD /path", r.Pattern)
		assert.Contains(t, []string{"GET", "POST", "PUT", "PATCH", "DELETE"}, method, r.Pattern)
		assert.True(t, strings.HasPrefix(path, "/"), r.Pattern)
		if r.Permission != PermNone {
			assert.Contains(t, known, r.Permission, r.Pattern)
		}
		assert.Equal(t, r.Query == "", r.QueryPermission == "", "%s: Query and QueryPermission go together", r.Pattern)
		assert.NotEqual(t, PermUnmapped, r.Permission, "%s: map it to a real permission", r.Pattern)
	}
}

func TestLookupFailsClosed(t *testing.T) {
	r, ok := Lookup("POST /api/v1/unmapped-example")
	assert.False(t, ok)
	assert.Equal(t, PermUnmapped, r.Permission)
	n := NeedOf("POST /api/v1/unmapped-example", "POST", "/api/v1/unmapped-example", nil)
	assert.True(t, n.Audit)
	for _, role := range []Role{RoleViewer, RoleOperator} {
		err := Authorize(User{Name: "u", Role: role}, n)
		var fe *ForbiddenError
		require.ErrorAs(t, err, &fe, role)
		assert.Equal(t, PermUnmapped, fe.Missing)
	}
	assert.NoError(t, Authorize(User{Name: "root", Role: RoleAdmin}, n))
	assert.Error(t, Authorize(User{Name: "nsadmin", Role: RoleAdmin, Namespace: "a"}, n),
		"a namespace-scoped admin does not reach an unmapped (cluster) route")
}

func TestNeedOf(t *testing.T) {
	cases := []struct {
		name, pattern, method, path, query string
		want                               Need
	}{
		{"read", "GET /api/v1/nodes", "GET", "/api/v1/nodes", "",
			Need{Permissions: []Permission{PermNodesRead}}},
		{"namespaced read", "GET /api/v1/daemonsets/{namespace}/{name}", "GET", "/api/v1/daemonsets/team-a/web", "",
			Need{Permissions: []Permission{PermDaemonSetsRead}, Namespace: "team-a", Namespaced: true}},
		{"escaped namespace", "GET /api/v1/daemonsets/{namespace}/{name}", "GET", "/api/v1/daemonsets/te%61m/web", "",
			Need{Permissions: []Permission{PermDaemonSetsRead}, Namespace: "team", Namespaced: true}},
		{"mutation audited", "DELETE /api/v1/daemonsets/{namespace}/{name}", "DELETE", "/api/v1/daemonsets/a/b", "",
			Need{Permissions: []Permission{PermDaemonSetsDelete}, Namespace: "a", Namespaced: true, Audit: true}},
		{"secret values escalate and are audited", "GET /api/v1/secrets/{namespace}/{name}", "GET", "/api/v1/secrets/a/s", "showValues=true",
			Need{Permissions: []Permission{PermSecretsRead, PermSecretsValues}, Namespace: "a", Namespaced: true, Audit: true}},
		{"showValues=false does not", "GET /api/v1/secrets", "GET", "/api/v1/secrets", "showValues=false",
			Need{Permissions: []Permission{PermSecretsRead}}},
		{"backup audited though a GET", "GET /api/v1/backup", "GET", "/api/v1/backup", "",
			Need{Permissions: []Permission{PermStoreBackup}, Audit: true}},
		{"apply: namespaces in the body", "POST /api/v1/apply", "POST", "/api/v1/apply", "",
			Need{Permissions: []Permission{PermDaemonSetsApply}, Namespaced: true, InBody: true, Audit: true}},
		{"dashboard action", "POST /ui/daemonsets/{namespace}/{name}/rollout", "POST", "/ui/daemonsets/x/y/rollout", "",
			Need{Permissions: []Permission{PermDaemonSetsRollout}, Namespace: "x", Namespaced: true, Audit: true}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			q, err := url.ParseQuery(tc.query)
			require.NoError(t, err)
			assert.Equal(t, tc.want, NeedOf(tc.pattern, tc.method, tc.path, q))
		})
	}
}

func TestAuthorize(t *testing.T) {
	viewer := User{Name: "ops", Role: RoleViewer}
	operatorA := User{Name: "ci", Role: RoleOperator, Namespace: "team-a"}
	cases := []struct {
		name string
		user User
		need Need
		want string // "" allowed, else the message
	}{
		{"viewer reads", viewer, Need{Permissions: []Permission{PermDaemonSetsRead}}, ""},
		{"viewer may not apply", viewer, Need{Permissions: []Permission{PermDaemonSetsApply}},
			`forbidden: user "ops" (viewer) lacks daemonsets.apply`},
		{"scoped operator in its namespace", operatorA,
			Need{Permissions: []Permission{PermDaemonSetsRollout}, Namespace: "team-a", Namespaced: true}, ""},
		{"scoped operator in another namespace", operatorA,
			Need{Permissions: []Permission{PermDaemonSetsRollout}, Namespace: "team-b", Namespaced: true},
			`forbidden: user "ci" (operator in namespace team-a) is scoped to namespace team-a, not team-b`},
		{"scoped operator on a cluster-scoped object", operatorA, Need{Permissions: []Permission{PermNodesUpdate}},
			`forbidden: user "ci" (operator in namespace team-a) is scoped to namespace team-a and may not act on cluster-scoped objects or across namespaces`},
		{"scoped operator lists across namespaces", operatorA, Need{Permissions: []Permission{PermDaemonSetsRead}},
			`forbidden: user "ci" (operator in namespace team-a) is scoped to namespace team-a and may not act on cluster-scoped objects or across namespaces`},
		{"the role is checked before the scope", operatorA, Need{Permissions: []Permission{PermNodesToken}},
			`forbidden: user "ci" (operator in namespace team-a) lacks nodes.token`},
		{"anyone reaches PermNone", operatorA, Need{Permissions: []Permission{PermNone}}, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := Authorize(tc.user, tc.need)
			if tc.want == "" {
				assert.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.Equal(t, tc.want, err.Error())
		})
	}
	assert.NoError(t, AuthorizeNamespaces(operatorA, []string{"team-a", "team-a"}))
	assert.EqualError(t, AuthorizeNamespaces(operatorA, []string{"team-a", "default"}),
		`forbidden: user "ci" (operator in namespace team-a) is scoped to namespace team-a, not default`)
	assert.NoError(t, AuthorizeNamespaces(viewer, []string{"x"}), "an unscoped user's namespaces are the role's business")
}

func TestSpecValidate(t *testing.T) {
	lim := Limits{MaxTTL: 48 * time.Hour}
	cases := []struct {
		name string
		spec Spec
		lim  Limits
		want []string // substrings, one per problem
	}{
		{"valid", Spec{Name: "ci-bot", Role: RoleOperator, Namespace: "team-a", TTL: time.Hour}, lim, nil},
		{"every problem at once", Spec{Name: "Bad_Name", Role: "root", Namespace: "-x", TTL: time.Second}, lim,
			[]string{"name: \"Bad_Name\"", "role: \"root\" is not one of viewer, operator, admin", "namespace: \"-x\"", "ttl: 1s is shorter than the minimum 1m0s"}},
		{"missing name", Spec{Role: RoleViewer}, lim, []string{"name: required"}},
		{"too long a ttl", Spec{Name: "a", Role: RoleViewer, TTL: 72 * time.Hour}, lim, []string{"ttl: 72h0m0s is longer than the maximum 48h0m0s (user-max-ttl)"}},
		{"negative ttl", Spec{Name: "a", Role: RoleViewer, TTL: -time.Hour}, lim, []string{"ttl: must not be negative"}},
		{"ttl required", Spec{Name: "a", Role: RoleViewer}, Limits{RequireTTL: true}, []string{"ttl: required"}},
		{"too long a name", Spec{Name: strings.Repeat("a", 64), Role: RoleViewer}, lim, []string{"at most 63"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.spec.Validate(tc.lim)
			if tc.want == nil {
				assert.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, ErrInvalid)
			for _, w := range tc.want {
				assert.Contains(t, err.Error(), w)
			}
			assert.Len(t, strings.Split(err.Error(), "\n"), len(tc.want))
		})
	}
}

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func TestUsersLifecycle(t *testing.T) {
	clk := &clock{t: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)}
	st := newMemStore()
	users, err := NewUsers(st, Limits{MaxUsers: 3}, "legacy-admin-token-0123456789", clk.now)
	require.NoError(t, err)

	admin, err := users.Authenticate("legacy-admin-token-0123456789")
	require.NoError(t, err, "the data directory's token is the first admin's")
	assert.Equal(t, User{Name: BootstrapAdmin, Role: RoleAdmin, TokenHash: HashToken("legacy-admin-token-0123456789"), CreatedAt: clk.now()}, admin)
	assert.NotContains(t, fmt.Sprint(st.users), "legacy-admin-token", "the store holds hashes, never tokens")

	ops, token, err := users.Create(Spec{Name: "ops", Role: RoleViewer, TTL: time.Hour}, "admin")
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(token, TokenPrefix))
	assert.Equal(t, clk.now().Add(time.Hour), ops.ExpiresAt)
	assert.Equal(t, "admin", ops.CreatedBy)
	assert.NotContains(t, fmt.Sprint(st.users), token)
	got, err := users.Authenticate(token)
	require.NoError(t, err)
	assert.Equal(t, "ops", got.Name)

	_, _, err = users.Create(Spec{Name: "ops", Role: RoleAdmin}, "admin")
	assert.ErrorIs(t, err, ErrExists)

	_, _, err = users.Create(Spec{Name: "ci", Role: RoleOperator}, "admin")
	require.NoError(t, err)
	_, _, err = users.Create(Spec{Name: "one-too-many", Role: RoleOperator}, "admin")
	assert.ErrorIs(t, err, ErrTooMany)
	assert.Contains(t, err.Error(), "user-max")

	clk.add(time.Hour)
	_, err = users.Authenticate(token)
	assert.ErrorIs(t, err, ErrUnauthenticated, "expired")
	assert.Contains(t, err.Error(), `"ops" expired`)

	_, err = users.Authenticate(TokenPrefix + "not-a-token")
	assert.ErrorIs(t, err, ErrUnauthenticated)

	require.NoError(t, users.Revoke("ops"))
	assert.ErrorIs(t, users.Revoke("ops"), ErrNotFound)
	assert.ErrorIs(t, users.Revoke(BootstrapAdmin), ErrLastAdmin, "the data directory's admin is not revocable")
	assert.Equal(t, []string{"admin", "ci"}, names(users.List()))

	// A restart reads the same table; a new admin.token replaces the
	// first admin's token, and the old one stops working.
	again, err := NewUsers(st, Limits{}, "replaced-admin-token-0123456789", clk.now)
	require.NoError(t, err)
	assert.Equal(t, []string{"admin", "ci"}, names(again.List()))
	_, err = again.Authenticate("legacy-admin-token-0123456789")
	assert.ErrorIs(t, err, ErrUnauthenticated)
	_, err = again.Authenticate("replaced-admin-token-0123456789")
	assert.NoError(t, err)
}

func TestUsersStoreFailureChangesNothing(t *testing.T) {
	st := newMemStore()
	users, err := NewUsers(st, Limits{}, "admin-token-0123456789abcdef", nil)
	require.NoError(t, err)
	st.fail = errors.New("disk full")
	_, _, err = users.Create(Spec{Name: "ops", Role: RoleViewer}, "admin")
	require.ErrorContains(t, err, "disk full")
	assert.Equal(t, []string{"admin"}, names(users.List()), "a user not stored does not exist")
}

// TestRandomTokensNeverAuthenticate is a property: no token but the ones
// issued authenticates, whatever it looks like.
func TestRandomTokensNeverAuthenticate(t *testing.T) {
	users, err := NewUsers(newMemStore(), Limits{}, "admin-token-0123456789abcdef", nil)
	require.NoError(t, err)
	var issued []string
	for i := range 20 {
		_, tok, err := users.Create(Spec{Name: fmt.Sprintf("u%d", i), Role: RoleViewer}, "admin")
		require.NoError(t, err)
		issued = append(issued, tok)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 2000 {
		tok := issued[rng.IntN(len(issued))]
		b := []byte(tok)
		b[rng.IntN(len(b))] ^= byte(1 + rng.IntN(255)) // one byte off
		if slices.Contains(issued, string(b)) {
			continue
		}
		_, err := users.Authenticate(string(b))
		require.ErrorIs(t, err, ErrUnauthenticated, "%q", b)
	}
	for i, tok := range issued {
		u, err := users.Authenticate(tok)
		require.NoError(t, err)
		assert.Equal(t, fmt.Sprintf("u%d", i), u.Name)
	}
}

func names(us []User) []string {
	out := make([]string, len(us))
	for i, u := range us {
		out[i] = u.Name
	}
	return out
}
