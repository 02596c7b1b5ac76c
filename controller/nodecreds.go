package controller

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/edgeset/edgeset/controller/api"
	"github.com/edgeset/edgeset/credential"
	"github.com/edgeset/edgeset/schema"
)

// Events recorded on a node when its credential changes epoch.
const (
	ReasonTokenRotated = "TokenRotated"
	ReasonReadmitted   = "Readmitted"
)

var _ api.NodeCredentials = (*Controller)(nil)

// credentialReloader is a transport that re-reads the revocation list
// and epochs at once (the embedded broker), disconnecting the nodes they
// no longer admit.
type credentialReloader interface {
	ReloadCredentials() error
}

// ReloadCredentials makes the embedded broker re-read the revocation
// list and node epochs now.
func (t *embeddedTransport) ReloadCredentials() error { return t.broker.Reload() }

// syncNodeEpochs writes DATA_DIR/node-epochs from the store, the source
// of truth (replicated in HA), so the broker and the NATS callout of
// this controller admit what the store says.
func (c *Controller) syncNodeEpochs() error {
	epochs, err := c.store.NodeEpochs()
	if err != nil {
		return err
	}
	if len(epochs) == 0 {
		if existing, err := credential.ReadEpochs(c.cfg.DataDir); err != nil || len(existing) == 0 {
			return err
		}
	}
	if err := credential.WriteEpochs(c.cfg.DataDir, epochs); err != nil {
		return fmt.Errorf("node epochs: %w", err)
	}
	return nil
}

// reloadCredentials tells the broker and the NATS callout about a change
// of the revocation list or epochs now rather than at their next poll.
func (c *Controller) reloadCredentials() {
	if r, ok := innermost(c.transport).(credentialReloader); ok {
		if err := r.ReloadCredentials(); err != nil {
			c.log.Error("reload node credentials", "err", err)
		}
	}
	if c.natsAuth != nil {
		if err := c.natsAuth.Reload(); err != nil {
			c.log.Error("nats-auth: reload node credentials", "err", err)
		}
	}
}

// RotateNodeToken moves node to its next credential epoch: its old token
// is refused from now on (a node connected with it to the embedded
// broker is disconnected) and the new one is returned. The rotation is
// recorded as an event on the node, with the new token's fingerprint.
func (c *Controller) RotateNodeToken(_ context.Context, node, requester string) (api.NodeToken, error) {
	secret, err := c.nodeSecret(node)
	if err != nil {
		return api.NodeToken{}, err
	}
	switch revoked, err := credential.Revoked(c.cfg.DataDir, secret, node); {
	case err != nil:
		return api.NodeToken{}, fmt.Errorf("rotate token of node %s: %w", node, err)
	case revoked:
		return api.NodeToken{}, fmt.Errorf("%w: node %s is revoked (listed in %s): re-admit it (edgesetctl node readmit %s) instead",
			api.ErrInvalid, node, filepath.Join(c.cfg.DataDir, credential.RevokedFile), node)
	}
	return c.nextEpoch(node, secret, requester, ReasonTokenRotated, "MQTT token rotated")
}

// ReadmitNode lifts node's revocation by name and moves it to its next
// credential epoch, so a token of before (perhaps the reason it was
// revoked) stays refused; it returns the new token. A node that is not
// revoked is refused: rotate its token instead.
func (c *Controller) ReadmitNode(_ context.Context, node, requester string) (api.NodeToken, error) {
	secret, err := c.nodeSecret(node)
	if err != nil {
		return api.NodeToken{}, err
	}
	switch revoked, err := credential.Revoked(c.cfg.DataDir, secret, node); {
	case err != nil:
		return api.NodeToken{}, fmt.Errorf("readmit node %s: %w", node, err)
	case !revoked:
		return api.NodeToken{}, fmt.Errorf("%w: node %s is not revoked; to give it a new token, rotate it (edgesetctl node token rotate %s)",
			api.ErrInvalid, node, node)
	}
	if _, err := credential.Readmit(c.cfg.DataDir, node); err != nil {
		return api.NodeToken{}, fmt.Errorf("readmit node %s: %w", node, err)
	}
	return c.nextEpoch(node, secret, requester, ReasonReadmitted, "node re-admitted with a new MQTT token")
}

// nodeSecret checks node's name and returns the fleet secret.
func (c *Controller) nodeSecret(node string) ([]byte, error) {
	if msg := schema.NodeNameProblem(node); msg != "" {
		return nil, fmt.Errorf("%w: %s (lowercase letters, digits, '-' and '.', at most 253 characters)", api.ErrInvalid, msg)
	}
	return credential.LoadOrCreateFleetSecret(c.cfg.DataDir)
}

// nextEpoch bumps node's epoch in the store, writes the epochs file,
// reloads the broker and records what happened.
func (c *Controller) nextEpoch(node string, secret []byte, requester, reason, what string) (api.NodeToken, error) {
	epoch, err := c.store.BumpNodeEpoch(node)
	if err != nil {
		return api.NodeToken{}, fmt.Errorf("%w: %w", api.ErrUnavailable, err)
	}
	if err := c.syncNodeEpochs(); err != nil {
		return api.NodeToken{}, fmt.Errorf("%w: epoch %d stored but not yet in effect: %w", api.ErrUnavailable, epoch, err)
	}
	c.reloadCredentials()
	token := credential.NodeTokenAt(secret, node, epoch)
	fp := credential.TokenFingerprint(token)
	c.events.add(nodeObject(node), schema.EventNormal, reason,
		fmt.Sprintf("%s (epoch %d) for %s, fingerprint %s", what, epoch, requester, fp))
	c.log.Info("node credential epoch changed", "node", node, "epoch", epoch, "reason", reason, "fingerprint", fp, "requester", requester)
	return api.NodeToken{Node: node, Username: node, Token: token, Fingerprint: fp, Epoch: epoch}, nil
}

// nodeEpoch returns node's current credential epoch from the store.
func (c *Controller) nodeEpoch(node string) (uint64, error) {
	epochs, err := c.store.NodeEpochs()
	if err != nil {
		return 0, err
	}
	return epochs[node], nil
}
