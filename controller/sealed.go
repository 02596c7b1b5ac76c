package controller

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/edgeset/edgeset/controller/api"
	"github.com/edgeset/edgeset/controller/datakey"
	"github.com/edgeset/edgeset/controller/store"
	"github.com/edgeset/edgeset/credential"
	"github.com/edgeset/edgeset/internal/fanout"
	"github.com/edgeset/edgeset/mqttclient"
	"github.com/edgeset/edgeset/schema"
	"github.com/edgeset/edgeset/sealing"
)

// Sealed secrets (issue 18, docs/security.md "Secrets only their device
// can read"). Every node has an X25519 key pair made on the device; the
// controller learns the public half through a channel the broker cannot
// tamper with (enrollment, or the node's own HTTPS call authenticated by
// its token, a replacement proving the registered key), keeps it in the
// store (bucket nodekeys) and seals each Secret it publishes for a node
// to that node's key (sealingTransport, before signing). A node without a
// key is sent nothing: its Secrets are withheld and an event says why,
// unless Config.UnsealedSecretsFallback sends them in the clear. At rest
// the store encrypts Secret records with data keys (controller/datakey).

// Reasons of the events about node keys.
const (
	ReasonNodeKeyRegistered = "NodeKeyRegistered"
	ReasonNodeKeyForgotten  = "NodeKeyForgotten"
	ReasonSecretsWithheld   = "SecretsWithheld"
	ReasonSecretsUnsealed   = "SecretsSentUnsealed"
)

// Sources of a node key record.
const (
	keySourceEnrollment = "enrollment"
	keySourceNode       = "node"
	keySourceRotation   = "node rotation"
	keySourceAdmin      = "admin"
)

// openSecretCipher returns the data keys that encrypt Secrets in the
// store: the key file's, or one derived from the fleet secret. With a key
// file the fleet key is held too, to decrypt only, so that a store
// written before the key file was set is read (and rewrapped).
func (c *Controller) openSecretCipher() (*datakey.Keys, error) {
	fleet, err := credential.LoadOrCreateFleetSecret(c.cfg.DataDir)
	if err != nil {
		return nil, err
	}
	fleetKey, err := datakey.FleetKey(fleet)
	if err != nil {
		return nil, err
	}
	if c.cfg.SecretEncryptionKeyFile != "" {
		return datakey.FromFile(c.cfg.SecretEncryptionKeyFile, fleetKey)
	}
	return datakey.New(fleetKey)
}

// rewrapSecrets moves every Secret record to the current data key: those
// a controller before encryption wrote, and those under a key the key
// file keeps only to be retired.
func (c *Controller) rewrapSecrets(keys *datakey.Keys) error {
	n, err := c.store.RewrapSecrets()
	if err != nil {
		return fmt.Errorf("encrypt the stored Secrets under data key %s: %w", keys.KeyID(), err)
	}
	if n > 0 {
		c.log.Info("stored Secrets encrypted under the current data key", "secrets", n, "keyId", keys.KeyID())
	}
	return nil
}

// maxKeylessEvents bounds the nodes a controller reports without a key
// by an event (one each), so a fleet of agents older than sealing does
// not push every other event out of the store; the rest are counted
// (edgeset_secrets_withheld_total) and answered by GET /nodes/N/key.
const maxKeylessEvents = 1000

// nodeKey is one node's registered key, parsed.
type nodeKey struct {
	rec store.NodeKeyRecord
	pub sealing.PublicKey
}

// nodeKeys is the key each node registered, as the store holds them; mu
// guards byNode and warned.
type nodeKeys struct {
	mu     sync.Mutex
	byNode map[string]nodeKey
	// warned are the nodes without a key already reported (one event per
	// node until it registers one), at most maxKeylessEvents.
	warned map[string]bool
}

func loadNodeKeys(st *store.Store) (*nodeKeys, error) {
	recs, err := st.ListNodeKeys()
	if err != nil {
		return nil, err
	}
	k := &nodeKeys{byNode: make(map[string]nodeKey, len(recs)), warned: map[string]bool{}}
	for node, rec := range recs {
		pub, err := sealing.ParsePublicKey(rec.PublicKey)
		if err != nil {
			return nil, fmt.Errorf("stored key of node %s: %w", node, err)
		}
		k.byNode[node] = nodeKey{rec: rec, pub: pub}
	}
	return k, nil
}

// get returns node's key.
func (k *nodeKeys) get(node string) (nodeKey, bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	nk, ok := k.byNode[node]
	return nk, ok
}

func (k *nodeKeys) set(nk nodeKey) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.byNode[nk.rec.Node] = nk
	delete(k.warned, nk.rec.Node)
}

func (k *nodeKeys) remove(node string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	delete(k.byNode, node)
	delete(k.warned, node)
}

// firstWarning reports whether node, found without a key, was not
// reported yet, and marks it reported.
func (k *nodeKeys) firstWarning(node string) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.warned[node] || len(k.warned) >= maxKeylessEvents {
		return false
	}
	k.warned[node] = true
	return true
}

// keyView is a key as the API shows it.
func keyView(rec store.NodeKeyRecord) api.NodeKey {
	return api.NodeKey{Node: rec.Node, PublicKey: rec.PublicKey, KeyID: rec.KeyID, RegisteredAt: rec.RegisteredAt, Source: rec.Source}
}

var _ api.NodeKeyBackend = (*Controller)(nil)

// parseNodeKey checks a node name and a public key given to the API.
func parseNodeKey(node, publicKey string) (sealing.PublicKey, error) {
	if msg := schema.NodeNameProblem(node); msg != "" {
		return sealing.PublicKey{}, fmt.Errorf("%w: node: %s", api.ErrInvalid, msg)
	}
	pub, err := sealing.ParsePublicKey(publicKey)
	if err != nil {
		return sealing.PublicKey{}, fmt.Errorf("%w: publicKey: %v", api.ErrInvalid, err)
	}
	return pub, nil
}

// RegisterNodeKey implements api.NodeKeyBackend: node's own registration
// over HTTPS with its token. Its first key is taken; a key equal to the
// registered one changes nothing; another key needs req.Proof, the answer
// to the challenge sealed to the registered key, so that whoever holds
// only the node's token (a broker operator sees it) cannot replace it.
func (c *Controller) RegisterNodeKey(ctx context.Context, node string, req api.NodeKeyRequest) (api.NodeKey, error) {
	pub, err := parseNodeKey(node, req.PublicKey)
	if err != nil {
		return api.NodeKey{}, err
	}
	cur, ok := c.nodeKeys.get(node)
	switch {
	case !ok:
		return c.registerNodeKey(ctx, node, pub, keySourceNode)
	case cur.pub.Equal(pub):
		return keyView(cur.rec), nil
	case registeredByNode(cur.rec) && c.now().Sub(cur.rec.RegisteredAt) < minKeyChangeInterval:
		return api.NodeKey{}, fmt.Errorf("%w: node %s registered key %s at %s: a node may replace its key once every %s",
			api.ErrTooSoon, node, cur.rec.KeyID, cur.rec.RegisteredAt.UTC().Format(time.RFC3339), minKeyChangeInterval)
	case len(req.Proof) == 0:
		box, err := sealing.SealChallenge(c.proofKey(), node, cur.pub, pub, c.now())
		if err != nil {
			return api.NodeKey{}, err
		}
		return api.NodeKey{}, &api.ChallengeError{KeyID: cur.rec.KeyID, Challenge: box}
	}
	if err := sealing.CheckProof(c.proofKey(), node, cur.pub, pub, req.Proof, c.now()); err != nil {
		c.log.Warn("node key replacement refused", "node", node, "registered", cur.rec.KeyID, "offered", pub.KeyID(), "err", err)
		return api.NodeKey{}, fmt.Errorf("%w: %v: register again without a proof for a new challenge", api.ErrForbidden, err)
	}
	return c.registerNodeKey(ctx, node, pub, keySourceRotation)
}

// minKeyChangeInterval is the least time between two keys a node
// registers itself (a key an enrollment or an admin registered may be
// replaced at once): each is a store write, an event and a republish of
// the node's Secrets, which a node must not be able to loop on.
const minKeyChangeInterval = time.Minute

// registeredByNode reports whether the node itself registered rec.
func registeredByNode(rec store.NodeKeyRecord) bool {
	return rec.Source == keySourceNode || rec.Source == keySourceRotation
}

// proofKey is the controller's key of node key challenges, derived from
// the fleet secret (every controller of an HA fleet checks what another
// issued).
func (c *Controller) proofKey() []byte {
	mac := hmac.New(sha256.New, c.fleetSecret)
	mac.Write([]byte("edgeset node key proof v1"))
	return mac.Sum(nil)
}

// SetNodeKey implements api.NodeKeyBackend: an admin registers a key read
// off the device (edgeset-agent key show), replacing any.
func (c *Controller) SetNodeKey(ctx context.Context, node, publicKey, requester string) (api.NodeKey, error) {
	pub, err := parseNodeKey(node, publicKey)
	if err != nil {
		return api.NodeKey{}, err
	}
	return c.registerNodeKey(ctx, node, pub, keySourceAdmin+" "+requester)
}

// GetNodeKey implements api.NodeKeyBackend.
func (c *Controller) GetNodeKey(_ context.Context, node string) (api.NodeKey, error) {
	nk, ok := c.nodeKeys.get(node)
	if !ok {
		return api.NodeKey{}, fmt.Errorf("%w: node %s has registered no sealing key: its Secrets are withheld", api.ErrNotFound, node)
	}
	return keyView(nk.rec), nil
}

// DeleteNodeKey implements api.NodeKeyBackend.
func (c *Controller) DeleteNodeKey(_ context.Context, node, requester string) error {
	found, err := c.store.DeleteNodeKey(node)
	if err != nil {
		return err
	}
	if !found {
		return fmt.Errorf("%w: node %s has registered no sealing key", api.ErrNotFound, node)
	}
	c.nodeKeys.remove(node)
	c.events.add(nodeObject(node), schema.EventNormal, ReasonNodeKeyForgotten,
		fmt.Sprintf("sealing key forgotten by %s: Secrets are withheld until the node registers a key again", requester))
	return nil
}

// registerNodeKey stores pub as node's key, then publishes the node's
// Secrets sealed to it (what was withheld, or sealed to the key before).
func (c *Controller) registerNodeKey(ctx context.Context, node string, pub sealing.PublicKey, source string) (api.NodeKey, error) {
	rec := store.NodeKeyRecord{Node: node, PublicKey: pub.String(), KeyID: pub.KeyID(), RegisteredAt: c.now(), Source: source}
	if err := c.store.PutNodeKey(rec); err != nil {
		return api.NodeKey{}, err
	}
	c.nodeKeys.set(nodeKey{rec: rec, pub: pub})
	c.events.add(nodeObject(node), schema.EventNormal, ReasonNodeKeyRegistered,
		fmt.Sprintf("sealing key %s registered (%s): its Secrets are sealed to it", pub.KeyID(), source))
	c.log.Info("node sealing key registered", "node", node, "keyId", pub.KeyID(), "source", source)
	if msgs := c.state.nodeSecretMessages(node); len(msgs) > 0 {
		// Not cut short by the caller going away: the registration is stored.
		if err := c.publishAll(context.WithoutCancel(ctx), msgs); err != nil && !errors.Is(err, mqttclient.ErrNotConnected) {
			c.log.Warn("publish a node's secrets under its new key; republished on the next connection", "node", node, "err", err)
		}
	}
	return keyView(rec), nil
}

// secretTopicParts returns the node and hash of a node's secret topic.
func secretTopicParts(topic string) (node, hash string, ok bool) {
	rest, ok := strings.CutPrefix(topic, schema.TopicPrefix+"nodes/")
	if !ok {
		return "", "", false
	}
	node, kind, _ := strings.Cut(rest, "/")
	hash, ok = strings.CutPrefix(kind, schema.TopicSecretsPrefix)
	return node, hash, ok && hash != ""
}

// sealChunk is the fewest messages one goroutine seals.
const sealChunk = 16

// sealingTransport seals the Secrets the controller publishes to their
// nodes' keys before the transport below (signing, then the broker)
// sends them.
type sealingTransport struct {
	transport
	keys     *nodeKeys
	fallback bool // Config.UnsealedSecretsFallback
	// noKey is told of each node found without a key whose Secret was
	// withheld (or sent unsealed, with fallback) the first time.
	noKey    func(node string, sentUnsealed bool)
	sealed   prometheus.Counter
	withheld prometheus.Counter
	unsealed prometheus.Counter
	failed   prometheus.Counter
	seconds  prometheus.Counter // time spent sealing (the wall clock)
}

func (t *sealingTransport) unwrap() transport { return t.transport }

func (t *sealingTransport) Publish(ctx context.Context, m mqttclient.Message) error {
	msgs := t.seal([]mqttclient.Message{m})
	if len(msgs) == 0 {
		return nil
	}
	return t.transport.Publish(ctx, msgs[0])
}

func (t *sealingTransport) PublishAll(ctx context.Context, msgs []mqttclient.Message) error {
	return t.transport.PublishAll(ctx, t.seal(msgs))
}

// seal returns msgs with every Secret's payload sealed to its node's key,
// in parallel, leaving out those it must withhold. msgs is not changed.
func (t *sealingTransport) seal(msgs []mqttclient.Message) []mqttclient.Message {
	start := time.Now() // for the metric (the wall clock)
	defer func() { t.seconds.Add(time.Since(start).Seconds()) }()
	out := slices.Clone(msgs)
	keep := make([]bool, len(out))
	fanout.Each(len(out), sealChunk, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			keep[i] = t.sealOne(&out[i])
		}
	})
	kept := out[:0]
	for i, m := range out {
		if keep[i] {
			kept = append(kept, m)
		}
	}
	return kept
}

// sealOne seals m in place if it is a Secret; it reports whether m is to
// be sent.
func (t *sealingTransport) sealOne(m *mqttclient.Message) bool {
	node, hash, ok := secretTopicParts(m.Topic)
	if !ok || len(m.Payload) == 0 || schema.IsSealedSecret(m.Payload) {
		return true // not a Secret, a cleared topic, or sealed already
	}
	nk, ok := t.keys.get(node)
	if !ok {
		if t.fallback {
			t.unsealed.Inc()
		} else {
			t.withheld.Inc()
		}
		if t.keys.firstWarning(node) {
			t.noKey(node, t.fallback)
		}
		return t.fallback
	}
	box, err := sealing.SealSecret(nk.pub, node, hash, m.Payload)
	if err == nil {
		m.Payload, err = json.Marshal(schema.SealedSecretMessage{SchemaVersion: schema.WireVersion, Node: node, Hash: hash, Sealed: box})
	}
	if err != nil {
		t.failed.Inc() // never sent in the clear instead
		return false
	}
	t.sealed.Inc()
	return true
}

// openSealing wraps t, the transport signing wraps, in the sealing of
// Secrets, and loads the node keys.
func (c *Controller) openSealing(t transport) (transport, error) {
	keys, err := loadNodeKeys(c.store)
	if err != nil {
		return nil, err
	}
	c.nodeKeys = keys
	f := factory{c.metrics.reg}
	return &sealingTransport{
		transport: t, keys: keys, fallback: c.cfg.UnsealedSecretsFallback, noKey: c.noNodeKey,
		sealed: f.counter("edgeset_secrets_sealed_total", "Secret messages sealed to their node's key before publishing."),
		withheld: f.counter("edgeset_secrets_withheld_total",
			"Secret messages not published because their node registered no sealing key."),
		unsealed: f.counter("edgeset_secrets_unsealed_total",
			"Secret messages published in the clear to nodes without a sealing key (unsealed-secrets-fallback)."),
		failed: f.counter("edgeset_secrets_seal_errors_total", "Secret messages not published because sealing failed."),
		seconds: f.counter("edgeset_secrets_seal_seconds_total",
			"Time spent sealing Secret messages before publishing them (wall clock, messages sealed in parallel)."),
	}, nil
}

// noNodeKey reports, once per node (until it registers a key), that a
// Secret of node was withheld or sent in the clear.
func (c *Controller) noNodeKey(node string, sentUnsealed bool) {
	if sentUnsealed {
		c.log.Warn("secret sent in the clear to a node without a sealing key (unsealed-secrets-fallback)", "node", node)
		c.events.add(nodeObject(node), schema.EventWarning, ReasonSecretsUnsealed,
			"node has registered no sealing key: its Secrets are sent in the clear (unsealed-secrets-fallback: true), "+
				"readable by the broker; upgrade its agent, which registers a key")
		return
	}
	c.log.Warn("secret withheld from a node without a sealing key", "node", node)
	c.events.add(nodeObject(node), schema.EventWarning, ReasonSecretsWithheld,
		"node has registered no sealing key: its Secrets are withheld, never sent in the clear. An agent of this release "+
			"registers its key at enrollment or when it starts (controller-url); an older agent needs upgrading "+
			"(or set unsealed-secrets-fallback: true, which lets the broker read them)")
}
