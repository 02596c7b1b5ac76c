package access

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// Rule is the permission one route needs. Pattern is the route's
// net/http ServeMux pattern exactly as registered ("GET /api/v1/nodes/{name}").
// When the request's boolean query parameter Query is true, the route
// needs QueryPermission as well (GET /secrets?showValues=true needs
// secrets.values on top of secrets.read), and the request is audited.
// Audit marks a read worth an audit record (a store backup); every
// request of another method than GET or HEAD is audited anyway.
// NoAudit exempts a route's authorized calls from the audit log whatever
// their method: an interactive exec session's input, whose session was
// audited when it started (the keystrokes are not recorded, and there are
// many); a call denied is audited still.
// NamespacesInBody marks a route whose objects name their namespaces in
// the request body (an apply): the route itself must check them for a
// namespace-scoped user (AuthorizeNamespaces).
type Rule struct {
	Pattern          string
	Permission       Permission
	Query            string
	QueryPermission  Permission
	Audit            bool
	NoAudit          bool
	NamespacesInBody bool
}

// Routes is the permission table of every route of the API and the
// dashboard. Add a row with each new route: a route without one needs
// PermUnmapped (admin only), and the API's and dashboard's tests fail.
var Routes = []Rule{
	// Served without a token.
	{Pattern: "GET /healthz", Permission: PermNone},
	{Pattern: "GET /readyz", Permission: PermNone},
	{Pattern: "GET /metrics", Permission: PermNone},

	// Reads.
	{Pattern: "GET /api/v1/version", Permission: PermNone},
	{Pattern: "GET /api/v1/whoami", Permission: PermNone},
	{Pattern: "GET /api/v1/sources", Permission: PermStatusRead},
	{Pattern: "GET /api/v1/events", Permission: PermStatusRead},
	{Pattern: "GET /api/v1/daemonsets", Permission: PermDaemonSetsRead},
	{Pattern: "GET /api/v1/daemonsets/{namespace}/{name}", Permission: PermDaemonSetsRead},
	{Pattern: "GET /api/v1/daemonsets/{namespace}/{name}/revisions", Permission: PermDaemonSetsRead},
	{Pattern: "GET /api/v1/instances", Permission: PermDaemonSetsRead},
	{Pattern: "GET /api/v1/nodes", Permission: PermNodesRead},
	{Pattern: "GET /api/v1/nodes/{name}", Permission: PermNodesRead},
	{Pattern: "GET /api/v1/nodes/{name}/key", Permission: PermNodesRead},
	{Pattern: "GET /api/v1/configmaps", Permission: PermConfigRead},
	{Pattern: "GET /api/v1/configmaps/{namespace}/{name}", Permission: PermConfigRead},
	{Pattern: "GET /api/v1/secrets", Permission: PermSecretsRead, Query: "showValues", QueryPermission: PermSecretsValues},
	{Pattern: "GET /api/v1/secrets/{namespace}/{name}", Permission: PermSecretsRead, Query: "showValues", QueryPermission: PermSecretsValues},
	{Pattern: "GET /api/v1/images", Permission: PermImagesRead},

	// Operator.
	{Pattern: "POST /api/v1/apply", Permission: PermDaemonSetsApply, NamespacesInBody: true},
	{Pattern: "DELETE /api/v1/daemonsets/{namespace}/{name}", Permission: PermDaemonSetsDelete},
	{Pattern: "POST /api/v1/daemonsets/{namespace}/{name}/rollout", Permission: PermDaemonSetsRollout},
	{Pattern: "POST /api/v1/daemonsets/{namespace}/{name}/rollout/force", Permission: PermDaemonSetsRollout},
	{Pattern: "DELETE /api/v1/daemonsets/{namespace}/{name}/instances/{node}", Permission: PermDaemonSetsRollout},
	{Pattern: "GET /api/v1/daemonsets/{namespace}/{name}/logs", Permission: PermLogsRead},
	{Pattern: "PATCH /api/v1/nodes/{name}", Permission: PermNodesUpdate},
	{Pattern: "DELETE /api/v1/configmaps/{namespace}/{name}", Permission: PermConfigDelete},
	{Pattern: "DELETE /api/v1/secrets/{namespace}/{name}", Permission: PermSecretsDelete},
	{Pattern: "POST /api/v1/images", Permission: PermImagesPush},
	{Pattern: "DELETE /api/v1/images", Permission: PermImagesDelete},
	// GET /api/v1/node/... (image fetches) is not in this table: nodes
	// authenticate there with their own credential, not a user's token
	// (controller/api/images.go).

	// Admin.
	{Pattern: "DELETE /api/v1/nodes/{name}", Permission: PermNodesDelete},
	{Pattern: "POST /api/v1/nodes/{name}/token", Permission: PermNodesToken},
	{Pattern: "POST /api/v1/nodes/{name}/token/rotate", Permission: PermNodesToken},
	{Pattern: "POST /api/v1/nodes/{name}/readmit", Permission: PermNodesToken},
	{Pattern: "PUT /api/v1/nodes/{name}/key", Permission: PermNodesToken},
	{Pattern: "DELETE /api/v1/nodes/{name}/key", Permission: PermNodesToken},
	{Pattern: "GET /api/v1/backup", Permission: PermStoreBackup, Audit: true},
	{Pattern: "GET /api/v1/users", Permission: PermUsersRead},
	{Pattern: "POST /api/v1/users", Permission: PermUsersManage},
	{Pattern: "DELETE /api/v1/users/{name}", Permission: PermUsersManage},
	{Pattern: "GET /api/v1/audit", Permission: PermAuditRead},
	{Pattern: "POST /api/v1/daemonsets/{namespace}/{name}/exec", Permission: PermExec},
	{Pattern: "POST /api/v1/daemonsets/{namespace}/{name}/exec/{session}/input", Permission: PermExec, NoAudit: true},
	{Pattern: "GET /api/v1/signing", Permission: PermStatusRead},
	{Pattern: "PUT /api/v1/signing/keyset", Permission: PermKeysManage},
	{Pattern: "POST /api/v1/enrollments", Permission: PermNodesToken},
	{Pattern: "GET /api/v1/enrollments", Permission: PermNodesToken},
	{Pattern: "DELETE /api/v1/enrollments/{id}", Permission: PermNodesToken},

	// A device enrolling authenticates with its enrollment code, not a
	// user's token (audited as a POST).
	{Pattern: "POST /api/v1/enroll", Permission: PermNone},

	// The dashboard. Its sign-in, sign-out and assets need a session at
	// most; its pages read, its actions act.
	{Pattern: "GET /ui/assets/", Permission: PermNone},
	{Pattern: "GET /ui/login", Permission: PermNone},
	{Pattern: "POST /ui/login", Permission: PermNone},
	{Pattern: "POST /ui/logout", Permission: PermNone},
	{Pattern: "GET /ui", Permission: PermNone},
	{Pattern: "GET /ui/{$}", Permission: PermStatusRead},
	{Pattern: "GET /ui/stream", Permission: PermStatusRead},
	{Pattern: "GET /ui/events", Permission: PermStatusRead},
	{Pattern: "GET /ui/nodes", Permission: PermNodesRead},
	{Pattern: "GET /ui/nodes/{name}", Permission: PermNodesRead},
	{Pattern: "GET /ui/daemonsets", Permission: PermDaemonSetsRead},
	{Pattern: "GET /ui/daemonsets/{namespace}/{name}", Permission: PermDaemonSetsRead},
	{Pattern: "POST /ui/nodes/{name}/{action}", Permission: PermNodesUpdate},
	{Pattern: "GET /ui/nodes/{name}/logs", Permission: PermLogsRead},
	{Pattern: "POST /ui/daemonsets/{namespace}/{name}/rollout", Permission: PermDaemonSetsRollout},
}

// rulesByPattern indexes Routes.
var rulesByPattern = func() map[string]Rule {
	m := make(map[string]Rule, len(Routes))
	for _, r := range Routes {
		if _, dup := m[r.Pattern]; dup {
			panic("access: route " + r.Pattern + " listed twice")
		}
		m[r.Pattern] = r
	}
	return m
}()

// Lookup returns pattern's rule, and whether Routes lists it. An
// unlisted pattern gets a rule needing PermUnmapped, audited.
func Lookup(pattern string) (Rule, bool) {
	r, ok := rulesByPattern[pattern]
	if !ok {
		return Rule{Pattern: pattern, Permission: PermUnmapped, Audit: true}, false
	}
	return r, true
}

// Need is what one request needs: the permissions, the namespace named
// in its path ("" for none), whether the route is namespaced at all (in
// its path, or in its body: InBody), and whether it is audited.
type Need struct {
	Permissions []Permission
	Namespace   string
	Namespaced  bool
	InBody      bool
	Audit       bool
}

// NeedOf returns what a request matched to pattern needs; q is its query
// and path its escaped path (the namespace is read from the segment
// where the pattern has {namespace}).
func NeedOf(pattern, method, escapedPath string, q url.Values) Need {
	rule, _ := Lookup(pattern)
	n := Need{Permissions: []Permission{rule.Permission}, Audit: rule.Audit || mutating(method) && !rule.NoAudit}
	if rule.Query != "" {
		if on, err := strconv.ParseBool(q.Get(rule.Query)); err == nil && on {
			n.Permissions = append(n.Permissions, rule.QueryPermission)
			n.Audit = true
		}
	}
	n.Namespace, n.Namespaced = pathValue(pattern, escapedPath, "{namespace}")
	if rule.NamespacesInBody {
		n.Namespaced, n.InBody = true, true
	}
	return n
}

// mutating reports whether method changes state.
func mutating(method string) bool {
	return method != http.MethodGet && method != http.MethodHead && method != http.MethodOptions
}

// pathValue returns the unescaped segment of escapedPath where pattern
// (method, space, path) has wildcard, and whether it has one.
func pathValue(pattern, escapedPath, wildcard string) (string, bool) {
	_, ppath, ok := strings.Cut(pattern, " ")
	if !ok {
		ppath = pattern
	}
	psegs := strings.Split(ppath, "/")
	for i, seg := range psegs {
		if seg != wildcard {
			continue
		}
		segs := strings.Split(escapedPath, "/")
		if i >= len(segs) {
			return "", true
		}
		v, err := url.PathUnescape(segs[i])
		if err != nil {
			return segs[i], true
		}
		return v, true
	}
	return "", false
}
