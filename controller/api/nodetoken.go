package api

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
)

// NodeToken is a node's MQTT credential as the controller mints it: the
// agent connects with username Username and password Token. Fingerprint
// names the token without disclosing it (events, revocation).
type NodeToken struct {
	Node        string `json:"node"`
	Username    string `json:"username"`
	Token       string `json:"token"`
	Fingerprint string `json:"fingerprint"`
	// Epoch is the node's credential epoch the token belongs to; it
	// grows with each rotation or re-admission.
	Epoch uint64 `json:"epoch,omitempty"`
}

// NodeTokenMinter is implemented by a Backend that mints node credentials
// (POST /api/v1/nodes/{name}/token). requester says who asked, for the
// event the mint records; the event never holds the token.
type NodeTokenMinter interface {
	MintNodeToken(ctx context.Context, node, requester string) (NodeToken, error)
}

// mintNodeToken serves POST /nodes/{name}/token. The node need not be
// known yet: a token is minted before a device first connects.
func (s *Server) mintNodeToken(w http.ResponseWriter, r *http.Request) (any, error) {
	m, ok := s.backend.(NodeTokenMinter)
	if !ok {
		return nil, fmt.Errorf("%w: this controller does not mint node tokens", ErrUnavailable)
	}
	w.Header().Set("Cache-Control", "no-store")
	return m.MintNodeToken(r.Context(), r.PathValue("name"), requesterOf(r))
}

// MintNodeToken asks the controller for node's MQTT credential; the
// controller records the mint as an event on the node.
func (c *Client) MintNodeToken(ctx context.Context, node string) (NodeToken, error) {
	var out NodeToken
	return out, c.do(ctx, http.MethodPost, "/nodes/"+url.PathEscape(node)+"/token", nil, &out)
}
