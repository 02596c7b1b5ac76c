package api

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/edgeset/edgeset/signing"
)

// SigningStatus is the controller's signing state (issue 18): its online
// key, the key set the fleet root signed for it, and what agents refused.
type SigningStatus struct {
	// Enabled is false when the controller publishes unsigned (signing
	// off); nothing else is set then.
	Enabled bool `json:"enabled"`
	// KeyID and PublicKey are the controller's online key, which
	// `edgesetctl keys delegate` signs into a key set.
	KeyID     string `json:"keyID,omitempty"`
	PublicKey string `json:"publicKey,omitempty"`
	// Validity is how long each signed document is acceptable.
	Validity string `json:"validity,omitempty"`
	// RootPinned says the controller verifies uploaded key sets against
	// signing-trust-root.
	RootPinned bool `json:"rootPinned,omitempty"`
	// KeySet is the current key set and KeySetEnvelope its signed form;
	// nil before the first delegation (agents then refuse everything).
	KeySet         *signing.KeySet `json:"keySet,omitempty"`
	KeySetEnvelope json.RawMessage `json:"keySetEnvelope,omitempty"`
	// Controllers lists the online key of every HA controller of the
	// fleet (controller/ha registers them in etcd), each marked with
	// whether the key set delegates it: keys delegate delegates them all,
	// so that agents accept whichever leads. Empty for a single
	// controller.
	Controllers []ControllerKey `json:"controllers,omitempty"`
	// Refusals counts, per node, the signed documents its agent refused
	// (the node's events with a signing.Reason), since the controller
	// started.
	Refusals []NodeRefusals `json:"refusals,omitempty"`
}

// ControllerKey is one HA controller's online public key.
type ControllerKey struct {
	Controller string `json:"controller"`
	KeyID      string `json:"keyID"`
	PublicKey  string `json:"publicKey"`
	// Delegated: the current key set delegates the key, unexpired.
	Delegated bool `json:"delegated"`
}

// NodeRefusals counts one node's refused documents.
type NodeRefusals struct {
	Node        string           `json:"node"`
	Total       int64            `json:"total"`
	ByReason    map[string]int64 `json:"byReason"`
	Last        time.Time        `json:"last"`
	LastReason  string           `json:"lastReason"`
	LastMessage string           `json:"lastMessage,omitempty"`
}

// SigningBackend is the part of a Backend that serves signing. A Backend
// without it answers 404 on the signing routes.
type SigningBackend interface {
	SigningStatus(ctx context.Context) (SigningStatus, error)
	// PutKeySet adopts a key set envelope signed by the fleet root.
	PutKeySet(ctx context.Context, envelope []byte) (SigningStatus, error)
}

// signingRoutes serves GET and PUT /api/v1/signing/keyset behind the API
// token, as every route.
func (s *Server) signingRoutes(p string) {
	sb, ok := s.backend.(SigningBackend)
	if !ok {
		return
	}
	s.handle("GET "+p+"/signing", func(_ http.ResponseWriter, r *http.Request) (any, error) {
		return sb.SigningStatus(r.Context())
	})
	s.handle("PUT "+p+"/signing/keyset", func(_ http.ResponseWriter, r *http.Request) (any, error) {
		data, err := readBody(r)
		if err != nil {
			return nil, err
		}
		if !json.Valid(data) {
			return nil, fmt.Errorf("%w: the body is not a key set envelope (JSON)", ErrInvalid)
		}
		return sb.PutKeySet(r.Context(), data)
	})
}

// Signing returns the controller's signing state.
func (c *Client) Signing(ctx context.Context) (SigningStatus, error) {
	var out SigningStatus
	return out, c.doJSON(ctx, http.MethodGet, "/signing", nil, &out)
}

// PutKeySet uploads a key set envelope signed by the fleet root.
func (c *Client) PutKeySet(ctx context.Context, envelope []byte) (SigningStatus, error) {
	var out SigningStatus
	return out, c.doJSON(ctx, http.MethodPut, "/signing/keyset", envelope, &out)
}
