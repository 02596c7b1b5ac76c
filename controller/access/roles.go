package access

import (
	"fmt"
	"slices"
	"strings"
)

// Role is what a user may do: a fixed set of permissions.
type Role string

// The roles, each holding the permissions of the one before it.
const (
	// RoleViewer reads everything but secret values, logs and the audit
	// log.
	RoleViewer Role = "viewer"
	// RoleOperator also applies and deletes manifests, labels, taints and
	// cordons nodes, drives rollouts and reads logs.
	RoleOperator Role = "operator"
	// RoleAdmin may do everything: users, node tokens, signing keys,
	// secret values, node deletion, exec, backups, the audit log.
	RoleAdmin Role = "admin"
)

// Roles lists the roles, least privileged first.
var Roles = []Role{RoleViewer, RoleOperator, RoleAdmin}

// ParseRole returns the role named s.
func ParseRole(s string) (Role, error) {
	if r := Role(s); slices.Contains(Roles, r) {
		return r, nil
	}
	return "", fmt.Errorf("role: %q is not one of %s", s, strings.Join(roleNames(), ", "))
}

func roleNames() []string {
	out := make([]string, len(Roles))
	for i, r := range Roles {
		out[i] = string(r)
	}
	return out
}

// Permission names one thing a route does, "resource.verb".
type Permission string

// The permissions. PermNone is a route anyone may reach (public, or
// authenticated its own way, as the dashboard's sign-in).
const (
	PermNone Permission = ""

	PermStatusRead     Permission = "status.read" // version, sources, events
	PermDaemonSetsRead Permission = "daemonsets.read"
	PermNodesRead      Permission = "nodes.read"
	PermConfigRead     Permission = "configmaps.read"
	PermSecretsRead    Permission = "secrets.read" // keys and sizes, never values
	PermImagesRead     Permission = "images.read"  // the image store's list

	PermDaemonSetsApply   Permission = "daemonsets.apply" // apply of any manifest (DaemonSet, ConfigMap, Secret)
	PermDaemonSetsDelete  Permission = "daemonsets.delete"
	PermDaemonSetsRollout Permission = "daemonsets.rollout" // pause, resume (with --force: override stale update locks), undo, restart, instance deletion
	PermConfigDelete      Permission = "configmaps.delete"
	PermSecretsDelete     Permission = "secrets.delete"
	PermNodesUpdate       Permission = "nodes.update" // label, taint, cordon
	PermLogsRead          Permission = "logs.read"
	PermImagesPush        Permission = "images.push"
	PermImagesDelete      Permission = "images.delete"

	PermSecretsValues Permission = "secrets.values"
	PermNodesDelete   Permission = "nodes.delete"
	PermNodesToken    Permission = "nodes.token" // mint, rotate, re-admit, enrollment codes
	PermUsersRead     Permission = "users.read"
	PermUsersManage   Permission = "users.manage"
	PermAuditRead     Permission = "audit.read"
	PermStoreBackup   Permission = "store.backup"
	PermKeysManage    Permission = "keys.manage"
	PermExec          Permission = "exec"

	// PermUnmapped is what a route missing from Routes needs: only an
	// unscoped admin has it.
	PermUnmapped Permission = "unmapped-route (admin only)"
)

// viewerPerms, operatorPerms and adminPerms are what each role adds to
// the one before it.
var (
	viewerPerms = []Permission{
		PermStatusRead, PermDaemonSetsRead, PermNodesRead, PermConfigRead, PermSecretsRead,
		PermImagesRead,
	}
	operatorPerms = []Permission{
		PermDaemonSetsApply, PermDaemonSetsDelete, PermDaemonSetsRollout, PermConfigDelete,
		PermSecretsDelete, PermNodesUpdate, PermLogsRead, PermImagesPush, PermImagesDelete,
	}
	adminPerms = []Permission{
		PermSecretsValues, PermNodesDelete, PermNodesToken, PermUsersRead, PermUsersManage,
		PermAuditRead, PermStoreBackup, PermKeysManage, PermExec, PermUnmapped,
	}
)

// Permissions returns the permissions role holds, in the order of the
// tables above; nil for an unknown role.
func (r Role) Permissions() []Permission {
	switch r {
	case RoleViewer:
		return slices.Clone(viewerPerms)
	case RoleOperator:
		return slices.Concat(viewerPerms, operatorPerms)
	case RoleAdmin:
		return slices.Concat(viewerPerms, operatorPerms, adminPerms)
	}
	return nil
}

// Has reports whether role holds p. Every role holds PermNone; an admin
// holds every permission, including ones added after this table (a
// route another part maps to a new permission is admin-only until a
// role here lists it).
func (r Role) Has(p Permission) bool {
	switch {
	case p == PermNone:
		return true
	case r == RoleAdmin:
		return true
	}
	return slices.Contains(r.Permissions(), p)
}

// AllPermissions lists every permission a role can hold.
func AllPermissions() []Permission { return RoleAdmin.Permissions() }
