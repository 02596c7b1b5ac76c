package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/edgeset/edgeset/controller/access"
	"github.com/edgeset/edgeset/controller/audit"
)

// UserInfo is a user as the API shows it: never its token or hash.
type UserInfo struct {
	Name      string    `json:"name"`
	Role      string    `json:"role"`
	Namespace string    `json:"namespace,omitempty"`
	CreatedAt time.Time `json:"createdAt,omitzero"`
	ExpiresAt time.Time `json:"expiresAt,omitzero"`
	CreatedBy string    `json:"createdBy,omitempty"`
	// Permissions lists what the role holds (GET /whoami).
	Permissions []string `json:"permissions,omitempty"`
}

func userInfo(u access.User) UserInfo {
	return UserInfo{Name: u.Name, Role: string(u.Role), Namespace: u.Namespace,
		CreatedAt: u.CreatedAt, ExpiresAt: u.ExpiresAt, CreatedBy: u.CreatedBy}
}

// CreateUserRequest is the body of POST /users. TTL is a Go duration
// ("720h"); empty for none.
type CreateUserRequest struct {
	Name      string `json:"name"`
	Role      string `json:"role"`
	Namespace string `json:"namespace,omitempty"`
	TTL       string `json:"ttl,omitempty"`
}

// CreatedUser is the answer of POST /users: the only time the token is
// shown.
type CreatedUser struct {
	User  UserInfo `json:"user"`
	Token string   `json:"token"`
}

// Audit query bounds.
const (
	DefaultAuditLimit = 1000
	MaxAuditLimit     = 10000
)

func (s *Server) accessRoutes(p string) {
	s.handle("GET "+p+"/whoami", s.whoami)
	s.handle("GET "+p+"/users", s.listUsers)
	s.handle("POST "+p+"/users", s.createUser)
	s.handle("DELETE "+p+"/users/{name}", s.revokeUser)
	s.handle("GET "+p+"/audit", s.auditLog)
	s.handle("POST "+p+"/nodes/{name}/token/rotate", s.rotateNodeToken)
	s.handle("POST "+p+"/nodes/{name}/readmit", s.readmitNode)
}

func (s *Server) whoami(_ http.ResponseWriter, r *http.Request) (any, error) {
	u, _ := UserFrom(r.Context())
	info := userInfo(u)
	for _, p := range u.Role.Permissions() {
		if p != access.PermUnmapped {
			info.Permissions = append(info.Permissions, string(p))
		}
	}
	return info, nil
}

func (s *Server) userAdmin() (UserAdmin, error) {
	if s.users == nil {
		return nil, fmt.Errorf("%w: this controller has no user table (single token)", ErrUnavailable)
	}
	return s.users, nil
}

func (s *Server) listUsers(_ http.ResponseWriter, _ *http.Request) (any, error) {
	ua, err := s.userAdmin()
	if err != nil {
		return nil, err
	}
	out := []UserInfo{}
	for _, u := range ua.List() {
		out = append(out, userInfo(u))
	}
	return out, nil
}

func (s *Server) createUser(w http.ResponseWriter, r *http.Request) (any, error) {
	ua, err := s.userAdmin()
	if err != nil {
		return nil, err
	}
	var req CreateUserRequest
	if err := decodeBody(r, &req); err != nil {
		return nil, err
	}
	spec := access.Spec{Name: req.Name, Role: access.Role(req.Role), Namespace: req.Namespace}
	if req.TTL != "" {
		if spec.TTL, err = time.ParseDuration(req.TTL); err != nil {
			return nil, fmt.Errorf("%w: ttl: %q is not a duration (e.g. 720h)", ErrInvalid, req.TTL)
		}
	}
	by, _ := UserFrom(r.Context())
	u, token, err := ua.Create(spec, by.Name)
	if err != nil {
		return nil, accessError(err)
	}
	w.Header().Set("Cache-Control", "no-store")
	return CreatedUser{User: userInfo(u), Token: token}, nil
}

func (s *Server) revokeUser(_ http.ResponseWriter, r *http.Request) (any, error) {
	ua, err := s.userAdmin()
	if err != nil {
		return nil, err
	}
	name := r.PathValue("name")
	if err := ua.Revoke(name); err != nil {
		return nil, accessError(err)
	}
	return map[string]string{"revoked": name}, nil
}

// accessError maps access's errors to the API's.
func accessError(err error) error {
	switch {
	case errors.Is(err, access.ErrInvalid):
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	case errors.Is(err, access.ErrNotFound):
		return fmt.Errorf("%w: %w", ErrNotFound, err)
	case errors.Is(err, access.ErrExists), errors.Is(err, access.ErrTooMany), errors.Is(err, access.ErrLastAdmin):
		return fmt.Errorf("%w: %w", ErrConflict, err)
	}
	return err
}

func (s *Server) auditLog(_ http.ResponseWriter, r *http.Request) (any, error) {
	if s.audit == nil {
		return nil, fmt.Errorf("%w: this controller keeps no audit log", ErrUnavailable)
	}
	f, err := auditFilter(r.URL.Query())
	if err != nil {
		return nil, err
	}
	out, err := s.audit.List(f)
	if out == nil {
		out = []audit.Entry{}
	}
	return out, err
}

// auditFilter parses GET /audit's query: since (a sequence number),
// sinceTime (RFC 3339), user, limit.
func auditFilter(q url.Values) (audit.Filter, error) {
	f := audit.Filter{User: q.Get("user"), Limit: DefaultAuditLimit}
	var err error
	if v := q.Get("since"); v != "" {
		if f.SinceSeq, err = strconv.ParseUint(v, 10, 64); err != nil {
			return f, fmt.Errorf("%w: query parameter since: %q is not a sequence number", ErrInvalid, v)
		}
	}
	if v := q.Get("sinceTime"); v != "" {
		if f.Since, err = time.Parse(time.RFC3339, v); err != nil {
			return f, fmt.Errorf("%w: query parameter sinceTime: %q is not an RFC 3339 time", ErrInvalid, v)
		}
	}
	if v := q.Get("limit"); v != "" {
		if f.Limit, err = strconv.Atoi(v); err != nil || f.Limit < 1 || f.Limit > MaxAuditLimit {
			return f, fmt.Errorf("%w: query parameter limit: %q is not an integer in 1..%d", ErrInvalid, v, MaxAuditLimit)
		}
	}
	return f, nil
}

// NodeCredentials is implemented by a Backend that rotates and re-admits
// node credentials (POST /nodes/{name}/token/rotate, /nodes/{name}/readmit):
// both move the node to a new credential epoch and return its new token;
// the old one is refused from then on.
type NodeCredentials interface {
	RotateNodeToken(ctx context.Context, node, requester string) (NodeToken, error)
	ReadmitNode(ctx context.Context, node, requester string) (NodeToken, error)
}

func (s *Server) nodeCredentials() (NodeCredentials, error) {
	nc, ok := s.backend.(NodeCredentials)
	if !ok {
		return nil, fmt.Errorf("%w: this controller does not rotate node tokens", ErrUnavailable)
	}
	return nc, nil
}

func (s *Server) rotateNodeToken(w http.ResponseWriter, r *http.Request) (any, error) {
	nc, err := s.nodeCredentials()
	if err != nil {
		return nil, err
	}
	w.Header().Set("Cache-Control", "no-store")
	return nc.RotateNodeToken(r.Context(), r.PathValue("name"), requesterOf(r))
}

func (s *Server) readmitNode(w http.ResponseWriter, r *http.Request) (any, error) {
	nc, err := s.nodeCredentials()
	if err != nil {
		return nil, err
	}
	w.Header().Set("Cache-Control", "no-store")
	return nc.ReadmitNode(r.Context(), r.PathValue("name"), requesterOf(r))
}

// WhoAmI returns the caller's user and permissions.
func (c *Client) WhoAmI(ctx context.Context) (UserInfo, error) {
	var out UserInfo
	return out, c.do(ctx, http.MethodGet, "/whoami", nil, &out)
}

// ListUsers returns every user.
func (c *Client) ListUsers(ctx context.Context) ([]UserInfo, error) {
	var out []UserInfo
	return out, c.do(ctx, http.MethodGet, "/users", nil, &out)
}

// CreateUser creates a user and returns it with its token.
func (c *Client) CreateUser(ctx context.Context, req CreateUserRequest) (CreatedUser, error) {
	var out CreatedUser
	return out, c.doJSONValue(ctx, http.MethodPost, "/users", req, &out)
}

// RevokeUser deletes a user; its token stops working at once.
func (c *Client) RevokeUser(ctx context.Context, name string) error {
	return c.do(ctx, http.MethodDelete, "/users/"+url.PathEscape(name), nil, nil)
}

// Audit returns the audit entries f selects, oldest first.
func (c *Client) Audit(ctx context.Context, f audit.Filter) ([]audit.Entry, error) {
	q := url.Values{}
	if f.SinceSeq > 0 {
		q.Set("since", strconv.FormatUint(f.SinceSeq, 10))
	}
	if !f.Since.IsZero() {
		q.Set("sinceTime", f.Since.UTC().Format(time.RFC3339))
	}
	if f.User != "" {
		q.Set("user", f.User)
	}
	if f.Limit > 0 {
		q.Set("limit", strconv.Itoa(f.Limit))
	}
	var out []audit.Entry
	return out, c.do(ctx, http.MethodGet, "/audit?"+q.Encode(), nil, &out)
}

// RotateNodeToken moves node to a new credential epoch and returns its
// new token; the old one is refused from then on.
func (c *Client) RotateNodeToken(ctx context.Context, node string) (NodeToken, error) {
	var out NodeToken
	return out, c.do(ctx, http.MethodPost, "/nodes/"+url.PathEscape(node)+"/token/rotate", nil, &out)
}

// ReadmitNode lifts node's revocation and returns its new token (of a new
// epoch: the revoked token stays refused).
func (c *Client) ReadmitNode(ctx context.Context, node string) (NodeToken, error) {
	var out NodeToken
	return out, c.do(ctx, http.MethodPost, "/nodes/"+url.PathEscape(node)+"/readmit", nil, &out)
}
