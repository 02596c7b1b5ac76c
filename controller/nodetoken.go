package controller

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/edgeset/edgeset/controller/api"
	"github.com/edgeset/edgeset/credential"
	"github.com/edgeset/edgeset/schema"
)

// ReasonTokenMinted is the event recorded on a node when its MQTT token is
// minted through the API.
const ReasonTokenMinted = "TokenMinted"

var _ api.NodeTokenMinter = (*Controller)(nil)

// MintNodeToken returns node's MQTT credential, derived from this
// controller's fleet secret, so it is one the broker accepts. The node
// need not have connected yet. The mint is recorded as an event on the
// node naming the requester and the token's fingerprint, never the token.
func (c *Controller) MintNodeToken(_ context.Context, node, requester string) (api.NodeToken, error) {
	if msg := schema.NodeNameProblem(node); msg != "" {
		return api.NodeToken{}, fmt.Errorf("%w: %s (lowercase letters, digits, '-' and '.', at most 253 characters)", api.ErrInvalid, msg)
	}
	secret, err := credential.LoadOrCreateFleetSecret(c.cfg.DataDir)
	if err != nil {
		return api.NodeToken{}, fmt.Errorf("mint token of node %s: %w", node, err)
	}
	switch revoked, err := credential.Revoked(c.cfg.DataDir, secret, node); {
	case err != nil:
		return api.NodeToken{}, fmt.Errorf("mint token of node %s: %w", node, err)
	case revoked:
		return api.NodeToken{}, fmt.Errorf("%w: node %s is revoked (listed in %s): its token, derived from its name, "+
			"would be refused by the broker; remove the entry to admit the node again",
			api.ErrInvalid, node, filepath.Join(c.cfg.DataDir, credential.RevokedFile))
	}
	epoch, err := c.nodeEpoch(node)
	if err != nil {
		return api.NodeToken{}, fmt.Errorf("mint token of node %s: %w", node, err)
	}
	token := credential.NodeTokenAt(secret, node, epoch)
	fp := credential.TokenFingerprint(token)
	c.events.add(nodeObject(node), schema.EventNormal, ReasonTokenMinted,
		fmt.Sprintf("MQTT token minted for %s, fingerprint %s", requester, fp))
	c.log.Info("node token minted", "node", node, "fingerprint", fp, "requester", requester)
	return api.NodeToken{Node: node, Username: node, Token: token, Fingerprint: fp, Epoch: epoch}, nil
}
