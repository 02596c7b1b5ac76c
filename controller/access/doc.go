// Package access decides who may do what through the controller's API and
// dashboard: API users with a role (viewer, operator, admin), optionally
// scoped to one namespace, and the permission every route needs.
//
// The permission table (Routes) is data: one row per route pattern, as
// the API and the dashboard register them with net/http's ServeMux. A
// route without a row needs PermUnmapped, which only an unscoped admin
// holds: a route added without a permission fails closed. The API's and
// the dashboard's tests walk every registered pattern and fail when one
// has no row.
//
// Namespace scoping follows Kubernetes RBAC: a user with a namespace is
// bound as by a Role (it acts only on objects of that namespace, named in
// the request's path or, for an apply, in every manifest it carries);
// a user without one as by a ClusterRole. Cluster-scoped objects (nodes,
// node tokens, users, the audit log, the store backup) and lists across
// namespaces are out of a scoped user's reach, as they are of a Role's.
//
// Tokens are TokenPrefix, a public ID that finds the user, and 256
// random bits; they are stored only as their SHA-256, which
// Users.Authenticate compares with the presented token's in constant
// time.
//
// Everything here is pure but Users, which holds the users in memory and
// writes through a Store the controller provides.
package access
