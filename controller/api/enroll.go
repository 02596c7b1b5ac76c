package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"time"
)

// ErrForbidden is a request the controller understood and refuses: an
// enrollment code that does not admit the device. Answered 403.
var ErrForbidden = errors.New("forbidden")

// EnrollPath is the one route a device calls without a bearer token: it
// authenticates with its enrollment code (POST, EnrollRequest).
const EnrollPath = "/api/" + Version + "/enroll"

// EnrollmentRequest asks for an enrollment code (POST /enrollments).
type EnrollmentRequest struct {
	// Node binds the code to one node name; empty for a code that admits
	// Uses devices, each naming itself.
	Node string `json:"node,omitempty"`
	// NamePrefix, without Node, is the prefix the names it admits must have.
	NamePrefix string `json:"namePrefix,omitempty"`
	// Uses is how many devices the code admits (default 1).
	Uses int `json:"uses,omitempty"`
	// TTL is the code's lifetime as a Go duration ("24h", the default).
	TTL string `json:"ttl,omitempty"`
	// Labels are set on every node the code admits.
	Labels      map[string]string `json:"labels,omitempty"`
	Description string            `json:"description,omitempty"`
}

// EnrollmentCode is an enrollment code as listed: Code, the secret, only
// in the answer to its creation.
type EnrollmentCode struct {
	ID          string            `json:"id"`
	Code        string            `json:"code,omitempty"`
	Node        string            `json:"node,omitempty"`
	NamePrefix  string            `json:"namePrefix,omitempty"`
	Labels      map[string]string `json:"labels,omitempty"`
	Uses        int               `json:"uses"`
	Enrolled    []string          `json:"enrolled,omitempty"`
	Description string            `json:"description,omitempty"`
	CreatedBy   string            `json:"createdBy,omitempty"`
	CreatedAt   time.Time         `json:"createdAt"`
	ExpiresAt   time.Time         `json:"expiresAt"`
	UsedAt      time.Time         `json:"usedAt,omitzero"`
}

// EnrollRequest is a device presenting its code (POST /enroll). Node is
// the name it asks for: required by a code that admits devices naming
// themselves, optional (and checked) with a code bound to one node.
type EnrollRequest struct {
	Code string `json:"code"`
	Node string `json:"node,omitempty"`
	// PublicKey is the X25519 key ("x25519:...") the device made for its
	// Secrets to be sealed to; the code authenticates it, so it replaces
	// any key the node had.
	PublicKey string `json:"publicKey,omitempty"`
}

// Enrollment is what an admitted device is given: its node name, its MQTT
// credential and the brokers to connect to.
type Enrollment struct {
	Node        string            `json:"node"`
	Username    string            `json:"username"`
	Token       string            `json:"token"`
	Fingerprint string            `json:"fingerprint"`
	BrokerURLs  []string          `json:"brokerURLs"`
	Labels      map[string]string `json:"labels,omitempty"`
	// TrustRoot is the fleet root public key ("ed25519:...") the device
	// pins (agent trust-root), when the controller knows it
	// (signing-trust-root); empty otherwise.
	TrustRoot string `json:"trustRoot,omitempty"`
}

// EnrollSource is where an enrollment request came from: the client's
// address (for the event and the failure throttle) and the host it
// reached the API at (the embedded broker's URLs are given on that host).
type EnrollSource struct {
	RemoteAddr string
	Host       string
	TLS        bool
}

// Enroller is implemented by a Backend that admits devices with
// enrollment codes.
type Enroller interface {
	CreateEnrollment(ctx context.Context, req EnrollmentRequest, requester string) (EnrollmentCode, error)
	ListEnrollments(ctx context.Context) ([]EnrollmentCode, error)
	DeleteEnrollment(ctx context.Context, id string) error
	Enroll(ctx context.Context, req EnrollRequest, src EnrollSource) (Enrollment, error)
}

func (s *Server) enrollRoutes(p string) {
	s.handle("POST "+p+"/enrollments", s.createEnrollment)
	s.handle("GET "+p+"/enrollments", s.listEnrollments)
	s.handle("DELETE "+p+"/enrollments/{id}", s.deleteEnrollment)
	s.handle("POST "+EnrollPath, s.enroll)
}

func (s *Server) enroller() (Enroller, error) {
	e, ok := s.backend.(Enroller)
	if !ok {
		return nil, fmt.Errorf("%w: this controller does not enroll devices", ErrUnavailable)
	}
	return e, nil
}

func (s *Server) createEnrollment(w http.ResponseWriter, r *http.Request) (any, error) {
	e, err := s.enroller()
	if err != nil {
		return nil, err
	}
	var req EnrollmentRequest
	if err := decodeBody(r, &req); err != nil {
		return nil, err
	}
	w.Header().Set("Cache-Control", "no-store")
	return e.CreateEnrollment(r.Context(), req, requesterOf(r))
}

func (s *Server) listEnrollments(_ http.ResponseWriter, r *http.Request) (any, error) {
	e, err := s.enroller()
	if err != nil {
		return nil, err
	}
	return e.ListEnrollments(r.Context())
}

func (s *Server) deleteEnrollment(_ http.ResponseWriter, r *http.Request) (any, error) {
	e, err := s.enroller()
	if err != nil {
		return nil, err
	}
	if err := e.DeleteEnrollment(r.Context(), r.PathValue("id")); err != nil {
		return nil, err
	}
	return map[string]string{"deleted": r.PathValue("id")}, nil
}

// enroll serves POST /enroll, which Admit lets through without a bearer
// token. A refused code counts as a failed authentication of its source,
// so guessing is throttled as a wrong token is.
func (s *Server) enroll(w http.ResponseWriter, r *http.Request) (any, error) {
	e, err := s.enroller()
	if err != nil {
		return nil, err
	}
	var req EnrollRequest
	if err := decodeBody(r, &req); err != nil {
		return nil, err
	}
	w.Header().Set("Cache-Control", "no-store")
	out, err := e.Enroll(r.Context(), req, EnrollSource{RemoteAddr: r.RemoteAddr, Host: r.Host, TLS: r.TLS != nil})
	if errors.Is(err, ErrForbidden) {
		s.obs.AuthFailed()
		s.guard.failed(sourceOf(r.RemoteAddr), "enrollment refused", r.Method, r.URL.Path)
	}
	return out, err
}

// AdmitDevice lets a request that a device authenticates itself (its
// enrollment code; its node credential, IsNodePath) through to the
// controller that checks it, unless its source is throttled after failing
// too often: a standby passes such requests on to the leader.
func (f *Front) AdmitDevice(w http.ResponseWriter, r *http.Request) bool {
	if d := f.guard.blocked(sourceOf(r.RemoteAddr)); d > 0 {
		f.obs.AuthThrottled()
		w.Header().Set("Retry-After", fmt.Sprint(int64(d.Seconds())+1))
		refuse(w, http.StatusTooManyRequests, "too many failed attempts from "+sourceOf(r.RemoteAddr))
		return false
	}
	w.Header().Set("Connection", "close") // an unauthenticated connection holds no slot after it
	return true
}

// CreateEnrollment asks the controller for an enrollment code.
func (c *Client) CreateEnrollment(ctx context.Context, req EnrollmentRequest) (EnrollmentCode, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return EnrollmentCode{}, err
	}
	var out EnrollmentCode
	return out, c.doJSON(ctx, http.MethodPost, "/enrollments", body, &out)
}

// ListEnrollments lists the controller's enrollment codes (without their
// secrets).
func (c *Client) ListEnrollments(ctx context.Context) ([]EnrollmentCode, error) {
	var out []EnrollmentCode
	return out, c.do(ctx, http.MethodGet, "/enrollments", nil, &out)
}

// DeleteEnrollment revokes the enrollment code id.
func (c *Client) DeleteEnrollment(ctx context.Context, id string) error {
	return c.do(ctx, http.MethodDelete, "/enrollments/"+url.PathEscape(id), nil, nil)
}

// Enroll presents an enrollment code; the client needs no token.
func (c *Client) Enroll(ctx context.Context, req EnrollRequest) (Enrollment, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return Enrollment{}, err
	}
	var out Enrollment
	return out, c.doJSON(ctx, http.MethodPost, "/enroll", body, &out)
}
