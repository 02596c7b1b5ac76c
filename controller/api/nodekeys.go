package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/edgeset/edgeset/schema"
)

// ErrTooSoon: a node replaces its key again too soon after the last
// (429).
var ErrTooSoon = errors.New("too soon")

// NodeKey is the X25519 public key a node's Secrets are sealed to.
type NodeKey struct {
	Node         string    `json:"node"`
	PublicKey    string    `json:"publicKey"`
	KeyID        string    `json:"keyId"`
	RegisteredAt time.Time `json:"registeredAt"`
	// Source says how the key came: "enrollment", "node" (the node's own
	// authenticated call), "node rotation" or "admin USER".
	Source string `json:"source"`
}

// NodeKeyRequest registers a node's public key ("x25519:..."). A node
// replacing a key the controller holds answers the challenge the first
// request got (a 409 with NodeKeyChallenge) in Proof: the bytes it
// opened with the registered key.
type NodeKeyRequest struct {
	PublicKey string `json:"publicKey"`
	Proof     []byte `json:"proof,omitempty"`
}

// NodeKeyChallenge is the body of the 409 answer to a node registering a
// new key while another is registered: Challenge is sealed to KeyID, the
// registered key.
type NodeKeyChallenge struct {
	Message   string           `json:"error"`
	KeyID     string           `json:"keyId"`
	Challenge schema.SealedBox `json:"challenge"`
}

// ChallengeError is a NodeKeyBackend's answer to a registration that
// must prove the registered key first.
type ChallengeError struct {
	KeyID     string
	Challenge schema.SealedBox
}

func (e *ChallengeError) Error() string {
	return fmt.Sprintf("the node has key %s registered: answer the challenge sealed to it to replace it", e.KeyID)
}

// NodeKeyBackend is implemented by a Backend that seals Secrets to node
// keys.
type NodeKeyBackend interface {
	// RegisterNodeKey is a node's own registration, authenticated with
	// its credential (NodeImagesPrefix+"key"). It fails with a
	// *ChallengeError when another key is registered and req carries no
	// valid proof of it.
	RegisterNodeKey(ctx context.Context, node string, req NodeKeyRequest) (NodeKey, error)
	// SetNodeKey is an admin's registration of a key read off the device.
	SetNodeKey(ctx context.Context, node, publicKey, requester string) (NodeKey, error)
	GetNodeKey(ctx context.Context, node string) (NodeKey, error)
	// DeleteNodeKey forgets node's key: its Secrets are withheld until it
	// registers one again (its first, needing no proof).
	DeleteNodeKey(ctx context.Context, node, requester string) error
}

// NodeKeyPath is where a node registers its key (PUT, NodeKeyRequest),
// authenticated as the node like image fetches.
const NodeKeyPath = NodeImagesPrefix + "key"

func (s *Server) nodeKeyRoutes(p string) {
	s.handle("GET "+p+"/nodes/{name}/key", s.getNodeKey)
	s.handle("PUT "+p+"/nodes/{name}/key", s.setNodeKey)
	s.handle("DELETE "+p+"/nodes/{name}/key", s.deleteNodeKey)
	s.nodeMux.HandleFunc("PUT "+NodeKeyPath, s.registerNodeKey)
}

func (s *Server) nodeKeyBackend() (NodeKeyBackend, error) {
	b, ok := s.backend.(NodeKeyBackend)
	if !ok {
		return nil, fmt.Errorf("%w: this controller does not seal secrets", ErrUnavailable)
	}
	return b, nil
}

func (s *Server) getNodeKey(_ http.ResponseWriter, r *http.Request) (any, error) {
	b, err := s.nodeKeyBackend()
	if err != nil {
		return nil, err
	}
	return b.GetNodeKey(r.Context(), r.PathValue("name"))
}

func (s *Server) setNodeKey(_ http.ResponseWriter, r *http.Request) (any, error) {
	b, err := s.nodeKeyBackend()
	if err != nil {
		return nil, err
	}
	var req NodeKeyRequest
	if err := decodeBody(r, &req); err != nil {
		return nil, err
	}
	if len(req.Proof) > 0 {
		return nil, fmt.Errorf("%w: proof: an admin sets a key without one", ErrInvalid)
	}
	return b.SetNodeKey(r.Context(), r.PathValue("name"), req.PublicKey, requesterOf(r))
}

func (s *Server) deleteNodeKey(_ http.ResponseWriter, r *http.Request) (any, error) {
	b, err := s.nodeKeyBackend()
	if err != nil {
		return nil, err
	}
	node := r.PathValue("name")
	if err := b.DeleteNodeKey(r.Context(), node, requesterOf(r)); err != nil {
		return nil, err
	}
	return map[string]string{"deleted": node}, nil
}

// registerNodeKey serves PUT node/key for the node serveNode
// authenticated.
func (s *Server) registerNodeKey(w http.ResponseWriter, r *http.Request) {
	v, err := func() (any, error) {
		b, err := s.nodeKeyBackend()
		if err != nil {
			return nil, err
		}
		var req NodeKeyRequest
		if err := decodeBody(r, &req); err != nil {
			return nil, err
		}
		return b.RegisterNodeKey(r.Context(), nodeOf(r), req)
	}()
	s.startWriteTimeout(w)
	var ch *ChallengeError
	switch {
	case errors.As(err, &ch):
		writeJSON(w, http.StatusConflict, NodeKeyChallenge{Message: ch.Error(), KeyID: ch.KeyID, Challenge: ch.Challenge})
	case errors.Is(err, ErrTooSoon):
		w.Header().Set("Retry-After", "60")
		writeJSON(w, http.StatusTooManyRequests, Error{Message: err.Error()})
	case err != nil:
		s.writeError(w, r, err)
	default:
		writeJSON(w, http.StatusOK, v)
	}
}

// GetNodeKey returns the key node's Secrets are sealed to.
func (c *Client) GetNodeKey(ctx context.Context, node string) (NodeKey, error) {
	var out NodeKey
	return out, c.do(ctx, http.MethodGet, "/nodes/"+url.PathEscape(node)+"/key", nil, &out)
}

// SetNodeKey registers publicKey as node's key (an admin's call).
func (c *Client) SetNodeKey(ctx context.Context, node, publicKey string) (NodeKey, error) {
	var out NodeKey
	return out, c.doJSONValue(ctx, http.MethodPut, "/nodes/"+url.PathEscape(node)+"/key", NodeKeyRequest{PublicKey: publicKey}, &out)
}

// DeleteNodeKey forgets node's key.
func (c *Client) DeleteNodeKey(ctx context.Context, node string) error {
	return c.do(ctx, http.MethodDelete, "/nodes/"+url.PathEscape(node)+"/key", nil, nil)
}

// NodeClient is a node's own client of the controller's API: it
// authenticates with the node's name and MQTT token (HTTP basic auth),
// as image fetches do.
type NodeClient struct {
	base, node, token string
	http              *http.Client
}

// NewNodeClient returns a client of the API at base for node.
func NewNodeClient(base, node, token string, hc *http.Client) *NodeClient {
	if hc == nil {
		hc = &http.Client{Timeout: 30 * time.Second}
	}
	return &NodeClient{base: strings.TrimRight(base, "/"), node: node, token: token, http: hc}
}

// RegisterNodeKey registers req.PublicKey as the node's key. When the
// controller holds another key for the node and req carries no valid
// proof, it returns the challenge (and a nil error): open it with the
// registered key and call again with the answer in Proof.
func (c *NodeClient) RegisterNodeKey(ctx context.Context, req NodeKeyRequest) (*NodeKey, *NodeKeyChallenge, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return nil, nil, err
	}
	hr, err := http.NewRequestWithContext(ctx, http.MethodPut, c.base+NodeKeyPath, bytes.NewReader(body))
	if err != nil {
		return nil, nil, fmt.Errorf("build request PUT %s: %w", NodeKeyPath, err)
	}
	hr.SetBasicAuth(c.node, c.token)
	hr.Header.Set("Content-Type", "application/json")
	resp, err := c.http.Do(hr)
	if err != nil {
		return nil, nil, fmt.Errorf("PUT %s%s: %w", c.base, NodeKeyPath, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusConflict {
		var ch NodeKeyChallenge
		data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		if err == nil {
			err = json.Unmarshal(data, &ch)
		}
		if err != nil {
			return nil, nil, fmt.Errorf("PUT %s: read the challenge: %w", NodeKeyPath, err)
		}
		return nil, &ch, nil
	}
	var out NodeKey
	if err := decodeResponse(resp, &out); err != nil {
		return nil, nil, fmt.Errorf("PUT %s%s: %w", c.base, NodeKeyPath, err)
	}
	return &out, nil, nil
}

// RegisterKey registers publicKey, answering with the challenge when the
// controller holds another key for the node: edgeagent.KeyRegistrar.
func (c *NodeClient) RegisterKey(ctx context.Context, publicKey string, proof []byte) (*schema.SealedBox, error) {
	_, ch, err := c.RegisterNodeKey(ctx, NodeKeyRequest{PublicKey: publicKey, Proof: proof})
	if err != nil || ch == nil {
		return nil, err
	}
	return &ch.Challenge, nil
}
