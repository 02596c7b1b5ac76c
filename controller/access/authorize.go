package access

import (
	"fmt"
	"strings"
)

// ForbiddenError is a denial: who, and what they lack. Its message is
// the body of the API's 403.
type ForbiddenError struct {
	User User
	// Missing is the permission the user lacks; empty when the denial is
	// of scope (Namespace says which namespace was asked for).
	Missing   Permission
	Namespace string
	// Cluster: the request reached beyond any one namespace.
	Cluster bool
}

func (e *ForbiddenError) Error() string {
	switch {
	case e.Missing != "":
		return fmt.Sprintf("forbidden: user %s lacks %s", e.User, e.Missing)
	case e.Cluster:
		return fmt.Sprintf("forbidden: user %s is scoped to namespace %s and may not act on cluster-scoped objects or across namespaces",
			e.User, e.User.Namespace)
	default:
		return fmt.Sprintf("forbidden: user %s is scoped to namespace %s, not %s", e.User, e.User.Namespace, e.Namespace)
	}
}

// Authorize returns nil when u may make a request needing n, else a
// *ForbiddenError. A request needing only PermNone is allowed to anyone.
// For a route whose namespaces are in its body (n.InBody), a scoped
// user's namespaces are the route's to check.
func Authorize(u User, n Need) error {
	only := true
	for _, p := range n.Permissions {
		if !u.Role.Has(p) {
			return &ForbiddenError{User: u, Missing: p}
		}
		only = only && p == PermNone
	}
	if only || u.Namespace == "" {
		return nil
	}
	if !n.Namespaced {
		return &ForbiddenError{User: u, Cluster: true}
	}
	if n.InBody {
		return nil // the route checks its objects' namespaces (AuthorizeNamespaces)
	}
	if n.Namespace != u.Namespace {
		return &ForbiddenError{User: u, Namespace: n.Namespace}
	}
	return nil
}

// AuthorizeNamespaces checks that a namespace-scoped user may act on
// every namespace of namespaces (an apply's manifests).
func AuthorizeNamespaces(u User, namespaces []string) error {
	if u.Namespace == "" {
		return nil
	}
	for _, ns := range namespaces {
		if ns != u.Namespace {
			return &ForbiddenError{User: u, Namespace: ns}
		}
	}
	return nil
}

// Describe returns "viewer: status.read, daemonsets.read, ..." for docs
// and help.
func Describe(r Role) string {
	perms := r.Permissions()
	names := make([]string, 0, len(perms))
	for _, p := range perms {
		if p != PermUnmapped {
			names = append(names, string(p))
		}
	}
	return string(r) + ": " + strings.Join(names, ", ")
}
