package edgeagent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/edgeset/edgeset/schema"
	"github.com/edgeset/edgeset/sealing"
)

// Sealed secrets (issue 18). The node has an X25519 key pair made here
// (Config.NodeKeyFile, mode 0600; the private key never leaves the
// device). The controller seals each Secret for this node to its public
// key, so the broker and other nodes carry only ciphertext. The agent
// opens a sealed Secret when it arrives and keeps it at rest as it came
// (SecretsSealed) or not at all (SecretsInMemory); the opened Secret lives
// in memory only, and in the files of the volumes that mount it.

// Where Secrets are kept between runs (Config.SecretsAtRest).
const (
	// SecretsSealed keeps each Secret in the local state as the sealed
	// message received; the key is in NodeKeyFile.
	SecretsSealed = "sealed"
	// SecretsInMemory keeps no Secret on disk: after a restart the agent
	// waits for the controller's retained messages, and secret volumes
	// are mounted on a tmpfs.
	SecretsInMemory = "memory"
)

// KeyRegistrar registers the node's public key with the controller over
// a channel the broker cannot tamper with (the controller's HTTPS API,
// authenticated with the node's token: api.NodeClient).
type KeyRegistrar interface {
	// RegisterKey registers publicKey ("x25519:..."). When the controller
	// holds another key for the node it returns a challenge sealed to
	// that key and a nil error; the agent opens it and calls again with
	// the answer as proof.
	RegisterKey(ctx context.Context, publicKey string, proof []byte) (challenge *schema.SealedBox, err error)
}

// nodeKeys is the agent's sealing keyring; mu guards ring, which the
// loop reads and registerKey replaces once a rotation is registered.
type nodeKeys struct {
	path string // the key file; "" for an ephemeral key

	mu   sync.Mutex
	ring sealing.Keyring
}

// openNodeKeys loads the node's keyring from cfg.NodeKeyFile, creating a
// key there when there is none, or makes one in memory for an Ephemeral
// agent without a key file.
func openNodeKeys(cfg Config) (*nodeKeys, error) {
	if cfg.NodeKeyFile == "" {
		k, err := sealing.GenerateKey()
		if err != nil {
			return nil, err
		}
		return &nodeKeys{ring: sealing.Keyring{Current: k}}, nil
	}
	ring, created, err := sealing.LoadOrCreateKeyFile(cfg.NodeKeyFile)
	if err != nil {
		return nil, err
	}
	if created && cfg.Logger != nil {
		cfg.Logger.Info("created the node's sealing key", "file", cfg.NodeKeyFile, "keyId", ring.Current.KeyID())
	}
	return &nodeKeys{path: cfg.NodeKeyFile, ring: ring}, nil
}

func (k *nodeKeys) keyring() sealing.Keyring {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.ring
}

// retirePrevious drops the previous key once the current one is
// registered: from then on the controller seals to the current one.
func (k *nodeKeys) retirePrevious() (retired string, err error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.ring.Previous == nil {
		return "", nil
	}
	next := sealing.Keyring{Current: k.ring.Current}
	if k.path != "" {
		if err := sealing.WriteKeyFile(k.path, next); err != nil {
			return "", err
		}
	}
	retired, k.ring = k.ring.Previous.KeyID(), next
	return retired, nil
}

// PublicKey is the node's current public key, as it registers it.
func (a *Agent) PublicKey() sealing.PublicKey { return a.keys.keyring().Current.Public() }

// Backoff of the key registration: from keyRetryInitial doubling to
// keyRetryMax while the controller cannot be reached or refuses.
const (
	keyRetryInitial = time.Second
	keyRetryMax     = 5 * time.Minute
)

// registerKey registers the node's key with Config.KeyRegistrar until it
// succeeds or ctx ends, then retires a previous key.
func (a *Agent) registerKey(ctx context.Context) {
	delay := keyRetryInitial
	for {
		err := a.registerKeyOnce(ctx)
		if err == nil {
			return
		}
		a.log.Warn("cannot register the node's sealing key with the controller; its Secrets are withheld until it is; will retry",
			"keyId", a.PublicKey().KeyID(), "retryIn", delay, "err", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(delay):
		}
		delay = min(2*delay, keyRetryMax)
	}
}

// registerKeyOnce registers the current key, answering the controller's
// challenge with the keyring when it holds another key for the node.
func (a *Agent) registerKeyOnce(ctx context.Context) error {
	ring := a.keys.keyring()
	pub := ring.Current.Public()
	challenge, err := a.cfg.KeyRegistrar.RegisterKey(ctx, pub.String(), nil)
	if err == nil && challenge != nil {
		var answer []byte
		answer, err = ring.OpenChallenge(a.cfg.NodeName, pub, *challenge)
		if errors.Is(err, sealing.ErrNotForKey) {
			return fmt.Errorf("the controller holds key %s for this node, which it no longer has: an admin must forget it "+
				"(edgesetctl node key rm %s) or re-enroll the node with a code bound to its name", challenge.KeyID, a.cfg.NodeName)
		}
		if err == nil {
			challenge, err = a.cfg.KeyRegistrar.RegisterKey(ctx, pub.String(), answer)
		}
		if err == nil && challenge != nil {
			err = errors.New("the controller asked again for a proof it was given")
		}
	}
	if err != nil {
		return err
	}
	retired, err := a.keys.retirePrevious()
	if err != nil {
		return fmt.Errorf("registered key %s, but cannot drop the previous key: %w", pub.KeyID(), err)
	}
	a.log.Info("registered the node's sealing key with the controller", "keyId", pub.KeyID(), "retired", retired)
	return nil
}

// openSecret returns the Secret of the payload b of this node's secret
// topic for hash, and what the agent keeps of it at rest: b itself when
// it came sealed, or, for a Secret an older controller (or
// unsealed-secrets-fallback) sent in the clear, the agent's own sealing
// of it. Its errors never quote a value.
func (a *Agent) openSecret(hash string, b []byte) (schema.SecretMessage, json.RawMessage, error) {
	node := a.cfg.NodeName
	if !schema.IsSealedSecret(b) {
		m, err := receiveSecret(node, hash, b)
		if err != nil {
			return m, nil, err
		}
		sealed, err := sealTo(a.keys.keyring().Current.Public(), node, hash, b)
		return m, sealed, err
	}
	sm, err := schema.DecodeSealedSecretMessage(b)
	if err != nil {
		return schema.SecretMessage{}, nil, err
	}
	if sm.Node != node || sm.Hash != hash {
		return schema.SecretMessage{}, nil, fmt.Errorf("sealed secret is for node %q hash %s, on the topic of node %q hash %s", sm.Node, sm.Hash, node, hash)
	}
	plain, err := a.keys.keyring().OpenSecret(node, hash, sm.Sealed)
	if err != nil {
		return schema.SecretMessage{}, nil, err
	}
	m, err := receiveSecret(node, hash, plain)
	return m, json.RawMessage(b), err
}

// sealTo seals the SecretMessage JSON plain for node's hash to pub, as
// the controller would have.
func sealTo(pub sealing.PublicKey, node, hash string, plain []byte) (json.RawMessage, error) {
	box, err := sealing.SealSecret(pub, node, hash, plain)
	if err != nil {
		return nil, err
	}
	return json.Marshal(schema.SealedSecretMessage{SchemaVersion: schema.WireVersion, Node: node, Hash: hash, Sealed: box})
}

// restoreSecrets adopts the persisted Secrets that open with the node's
// keys as the Secret of their hash; the others are fetched again. Secrets
// a store before sealing kept in the clear are sealed in place, or, with
// SecretsInMemory, every persisted Secret is dropped.
func (a *Agent) restoreSecrets(persisted map[string]json.RawMessage) {
	if a.cfg.SecretsAtRest == SecretsInMemory {
		if len(persisted) > 0 {
			if err := a.store.dropSecrets(); err != nil {
				a.log.Error("cannot drop the secrets kept at rest (secrets-at-rest: memory)", "err", err)
			}
		}
		return
	}
	for h, raw := range persisted {
		s, reseal, err := a.restoreSecret(h, raw)
		if err != nil {
			a.log.Warn("dropping a cached secret that does not open; it is fetched again", "hash", h, "err", err)
			continue
		}
		a.secrets[h] = s
		if reseal == nil {
			continue
		}
		if err := a.store.saveSecret(h, reseal); err != nil {
			a.log.Error("cannot seal a secret kept in the clear by an older agent", "hash", h, "err", err)
		}
	}
}

// restoreSecret opens one persisted Secret; reseal is what to keep in its
// place when it was kept in the clear.
func (a *Agent) restoreSecret(hash string, raw json.RawMessage) (s schema.Secret, reseal json.RawMessage, err error) {
	node := a.cfg.NodeName
	if schema.IsSealedSecret(raw) {
		m, _, err := a.openSecret(hash, raw)
		return m.Secret, nil, err
	}
	if err := json.Unmarshal(raw, &s); err != nil {
		return s, nil, errors.New("cannot decode")
	}
	if schema.SecretHash(s) != hash {
		return s, nil, errors.New("content does not hash to its key")
	}
	plain, err := json.Marshal(schema.SecretMessage{SchemaVersion: schema.WireVersion, Node: node, Hash: hash, Secret: s})
	if err == nil {
		reseal, err = sealTo(a.keys.keyring().Current.Public(), node, hash, plain)
	}
	return s, reseal, err
}

// RotateNodeKey gives the node a new sealing key, with the agent stopped:
// it writes the key file with the new key current and the old one kept
// as previous (the agent retires it once the controller has the new one,
// registerKey), then seals every Secret kept in DataDir's local state to
// the new key, so a device that reboots offline still opens them. It
// returns the new keyring.
func RotateNodeKey(cfg Config) (sealing.Keyring, error) {
	if err := cfg.validate(); err != nil {
		return sealing.Keyring{}, err
	}
	cfg = cfg.withDefaults()
	if cfg.Ephemeral {
		return sealing.Keyring{}, errors.New("rotate the node key: an ephemeral agent keeps its key in memory")
	}
	ring, err := sealing.ReadKeyFile(cfg.NodeKeyFile)
	if err != nil {
		return sealing.Keyring{}, err
	}
	st, err := openBoltStoreForRotation(cfg.DataDir)
	if err != nil {
		return sealing.Keyring{}, err
	}
	defer st.close()
	state, err := st.load()
	if err != nil {
		return sealing.Keyring{}, err
	}
	next, err := ring.Rotate()
	if err != nil {
		return sealing.Keyring{}, err
	}
	if err := sealing.WriteKeyFile(cfg.NodeKeyFile, next); err != nil {
		return sealing.Keyring{}, err
	}
	keys := &nodeKeys{path: cfg.NodeKeyFile, ring: next}
	a := &Agent{cfg: cfg, keys: keys, log: cfg.Logger}
	for h, raw := range state.secrets {
		m, reseal, err := a.restoreSecret(h, raw)
		if err == nil && reseal == nil {
			var plain []byte
			if plain, err = json.Marshal(schema.SecretMessage{SchemaVersion: schema.WireVersion, Node: cfg.NodeName, Hash: h, Secret: m}); err == nil {
				reseal, err = sealTo(next.Current.Public(), cfg.NodeName, h, plain)
			}
		}
		if err == nil {
			err = st.saveSecret(h, reseal)
		}
		if err != nil {
			return next, fmt.Errorf("seal the kept secret %s to the new key (the key file holds both keys; run again or let the agent fetch it): %w", h, err)
		}
	}
	return next, nil
}

// openBoltStoreForRotation opens DataDir's local state for RotateNodeKey,
// naming a running agent as the likely holder of its lock.
func openBoltStoreForRotation(dir string) (*boltStore, error) {
	s, setAside, err := openBoltStore(dir)
	if err != nil {
		return nil, fmt.Errorf("%w (is the agent running? stop it first)", err)
	}
	if setAside != "" {
		_ = s.close()
		return nil, fmt.Errorf("the agent's state file was damaged and moved aside to %s", setAside)
	}
	return s, nil
}
