package controller

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/edgeset/edgeset/controller/api"
	"github.com/edgeset/edgeset/internal/fanout"
	"github.com/edgeset/edgeset/mqttclient"
	"github.com/edgeset/edgeset/schema"
	"github.com/edgeset/edgeset/signing"
)

// Signing (issue 18): with Config.Signing the controller signs every
// desired state, revision, ConfigMap and Secret it publishes with its
// online key (DataDir/signing.key, created on first start), and publishes
// the key set the offline fleet root signed for it (uploaded through the
// API by edgesetctl keys delegate, kept in the store, so HA controllers
// share it) retained on schema.KeySetTopic. The root's private key is
// never here. Each HA controller keeps its own online key; the key set
// delegates every one (Config.SigningPeers lists them).

// SigningKeyPath is the online signing key's file in dataDir.
func SigningKeyPath(dataDir string) string { return filepath.Join(dataDir, "signing.key") }

// keySetPath is where a controller before the key set moved into the
// store kept it; it is read once, when the store holds none.
func (c *Config) keySetPath() string { return filepath.Join(c.DataDir, "keyset.json") }

// LoadOrCreateSigningKey reads dataDir's online signing key, creating it
// (mode 0600) when there is none. A key file others may read is refused.
func LoadOrCreateSigningKey(dataDir string) (ed25519.PrivateKey, error) {
	path := SigningKeyPath(dataDir)
	priv, err := signing.ReadPrivateKeyFile(path)
	if errors.Is(err, os.ErrNotExist) {
		if priv, err = signing.GenerateKey(); err == nil {
			err = signing.WritePrivateKeyFile(path, priv)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("signing key: %w", err)
	}
	return priv, nil
}

// DefaultSigningValidity is how long a signed document stays acceptable.
const DefaultSigningValidity = 7 * 24 * time.Hour

// minSigningValidity bounds signing-validity from below: the controller
// re-signs everything every half validity.
const minSigningValidity = time.Minute

// keySetStore keeps the key set envelope (the controller's store).
type keySetStore interface {
	KeySet() ([]byte, error)
	PutKeySet(env []byte) error
}

// signingKeys is the controller's online key and the key set delegating
// it. mu guards keySet and parsed, and serialises key set uploads.
type signingKeys struct {
	signer   *signing.Signer
	validity time.Duration
	root     ed25519.PublicKey // signing-trust-root; nil when not configured
	store    keySetStore

	mu     sync.Mutex
	keySet []byte          // the accepted envelope; nil before the first delegation
	parsed *signing.KeySet // keySet's content
}

// openSigningKeys loads the online key (creating it on first start) and
// the key set in st. A store without one takes the data directory's
// keyset.json, where a controller of an earlier version kept it.
func openSigningKeys(cfg Config, st keySetStore) (*signingKeys, error) {
	priv, err := LoadOrCreateSigningKey(cfg.DataDir)
	if err != nil {
		return nil, err
	}
	k := &signingKeys{signer: signing.NewSigner(priv), validity: cfg.SigningValidity, store: st}
	if cfg.SigningTrustRoot != "" {
		if k.root, err = signing.LoadPublicKey(cfg.SigningTrustRoot); err != nil {
			return nil, fmt.Errorf("signing-trust-root: %w", err)
		}
	}
	env, err := st.KeySet()
	if err != nil {
		return nil, err
	}
	from := "the store"
	if env == nil {
		if env, err = signing.ReadKeySetFile(cfg.keySetPath()); err != nil || env == nil {
			return k, err
		}
		from = cfg.keySetPath()
		if err := st.PutKeySet(env); err != nil {
			return nil, fmt.Errorf("move key set %s into the store: %w", from, err)
		}
	}
	ks, err := k.open(env)
	if err != nil {
		return nil, fmt.Errorf("key set in %s: %w", from, err)
	}
	k.keySet, k.parsed = env, &ks
	return k, nil
}

// open checks a key set envelope: against the root when one is
// configured, else only its shape (the controller holds no root key).
func (k *signingKeys) open(env []byte) (signing.KeySet, error) {
	if k.root != nil {
		return signing.OpenKeySet(k.root, env)
	}
	return signing.UnverifiedKeySet(env)
}

// setKeySet adopts an uploaded key set: newer than the current one and
// delegating this controller's key, unexpired at now. It is stored
// before it is adopted.
func (k *signingKeys) setKeySet(env []byte, now time.Time) (signing.KeySet, error) {
	ks, err := k.open(env)
	if err != nil {
		return signing.KeySet{}, fmt.Errorf("%w: %v", api.ErrInvalid, err)
	}
	own, ok := ks.Key(k.signer.KeyID())
	if !ok {
		return signing.KeySet{}, fmt.Errorf("%w: the key set does not delegate this controller's key %s: agents would refuse everything it signs",
			api.ErrInvalid, k.signer.KeyID())
	}
	if !own.Expires.After(now) {
		return signing.KeySet{}, fmt.Errorf("%w: the key set's delegation of key %s expired at %s", api.ErrInvalid, own.ID, own.Expires.Format(time.RFC3339))
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.parsed != nil && ks.Version <= k.parsed.Version {
		return signing.KeySet{}, fmt.Errorf("%w: key set version %d: must be above the current version %d", api.ErrInvalid, ks.Version, k.parsed.Version)
	}
	if err := k.store.PutKeySet(env); err != nil {
		return signing.KeySet{}, err
	}
	k.keySet, k.parsed = bytes.Clone(env), &ks
	return ks, nil
}

// delegated reports whether the current key set delegates key id,
// unexpired at now.
func (k *signingKeys) delegated(id string, now time.Time) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.parsed == nil {
		return false
	}
	key, ok := k.parsed.Key(id)
	return ok && key.Expires.After(now)
}

// keySetMessage is the retained key set message; ok is false before the
// first delegation.
func (k *signingKeys) keySetMessage() (mqttclient.Message, bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.keySet == nil {
		return mqttclient.Message{}, false
	}
	return mqttclient.Message{Topic: schema.KeySetTopic, Payload: k.keySet, Retained: true}, true
}

// status is the signing part of the API.
func (k *signingKeys) status() api.SigningStatus {
	k.mu.Lock()
	defer k.mu.Unlock()
	st := api.SigningStatus{Enabled: true, KeyID: k.signer.KeyID(), PublicKey: signing.FormatPublicKey(k.signer.PublicKey()),
		Validity: k.validity.String(), RootPinned: k.root != nil}
	if k.parsed != nil {
		ks := *k.parsed
		st.KeySet = &ks
		st.KeySetEnvelope = json.RawMessage(k.keySet)
	}
	return st
}

// signedTopic says whether messages on topic are signed, and for which
// node (signing.AnyNode for the shared revisions and ConfigMaps).
func signedTopic(topic string) (node string, ok bool) {
	if rest, ok := strings.CutPrefix(topic, schema.TopicPrefix+"nodes/"); ok {
		node, kind, _ := strings.Cut(rest, "/")
		if kind == schema.TopicDesired || strings.HasPrefix(kind, schema.TopicSecretsPrefix) || isRequestKind(kind) {
			return node, true
		}
		return "", false
	}
	if strings.HasPrefix(topic, schema.RevisionTopic("")) || strings.HasPrefix(topic, schema.ConfigMapTopic("")) {
		return signing.AnyNode, true
	}
	return "", false
}

// signed reports whether m is published signed: its topic is, and it is
// not a cleared (empty) retained message.
func signed(m mqttclient.Message) bool {
	_, ok := signedTopic(m.Topic)
	return ok && len(m.Payload) > 0
}

// statement is what the controller signs for m, a signed message, at now.
// A document's times are whole seconds in UTC (20 characters each, where
// nanoseconds take 30): they bound its validity, which is days, while a
// request's issuance is its identity against replay (signing.requestGate)
// and keeps every digit.
func (k *signingKeys) statement(m mqttclient.Message, now time.Time) (signing.Statement, error) {
	node, _ := signedTopic(m.Topic)
	now = now.UTC()
	st := signing.Statement{Topic: m.Topic, Node: node, Body: m.Payload}
	if isRequestTopic(m.Topic) {
		st.IssuedAt, st.ExpiresAt = now, now.Add(signing.RequestValidity)
	} else {
		now = now.Truncate(time.Second)
		st.IssuedAt, st.ExpiresAt = now, now.Add(k.validity)
	}
	if node != signing.AnyNode && strings.HasSuffix(m.Topic, "/"+schema.TopicDesired) {
		g, err := desiredGeneration(m.Payload)
		if err != nil {
			return st, fmt.Errorf("sign %s: %w", m.Topic, err)
		}
		st.Generation = g
	}
	return st, nil
}

// generationField starts the generation of an encoded DesiredState.
var generationField = []byte(`"generation":`)

// desiredGeneration reads the generation of a DesiredState as
// desiredMessage encodes it, without decoding the rest (a desired state
// of many instances is kilobytes, read once per node per change):
// encoding/json writes schemaVersion, node and generation first, in the
// struct's order, and a node name holds no '"', so the first
// "generation": is the field.
func desiredGeneration(b []byte) (uint64, error) {
	i := bytes.Index(b, generationField)
	if i < 0 {
		return 0, errors.New("no generation in the desired state")
	}
	digits := b[i+len(generationField):]
	n := 0
	for n < len(digits) && digits[n] >= '0' && digits[n] <= '9' {
		n++
	}
	g, err := strconv.ParseUint(string(digits[:n]), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("generation: %w", err)
	}
	return g, nil
}

// signBatch signs msgs, all signed messages, at most signing.MaxBatch,
// with one signature, replacing each payload by its envelope.
func (k *signingKeys) signBatch(msgs []mqttclient.Message, now time.Time) error {
	sts := make([]signing.Statement, len(msgs))
	for i, m := range msgs {
		st, err := k.statement(m, now)
		if err != nil {
			return err
		}
		sts[i] = st
	}
	envs, err := k.signer.SignBatch(sts)
	if err != nil {
		return err
	}
	for i, env := range envs {
		msgs[i].Payload = env
	}
	return nil
}

// signingTransport signs what the controller publishes before its
// transport sends it.
type signingTransport struct {
	transport
	keys    *signingKeys
	now     func() time.Time
	signed  prometheus.Counter
	failed  prometheus.Counter
	seconds prometheus.Counter // time spent signing (the wall clock)
	tooLong func(mqttclient.Message)
}

func (t *signingTransport) unwrap() transport { return t.transport }

// signChunk is the fewest batches one goroutine signs.
const signChunk = 2

func (t *signingTransport) Publish(ctx context.Context, m mqttclient.Message) error {
	msgs, err := t.sign([]mqttclient.Message{m})
	if err != nil {
		return err
	}
	if len(msgs) == 0 {
		return nil
	}
	return t.transport.Publish(ctx, msgs[0])
}

func (t *signingTransport) PublishAll(ctx context.Context, msgs []mqttclient.Message) error {
	signed, err := t.sign(msgs)
	if err != nil {
		return err
	}
	return t.transport.PublishAll(ctx, signed)
}

// sign signs the signed messages among msgs in batches of
// signing.BatchSize (one signature each), the batches in parallel, and
// leaves out (and reports) any message grown past what one message may
// carry. msgs is not changed.
func (t *signingTransport) sign(msgs []mqttclient.Message) ([]mqttclient.Message, error) {
	start := time.Now() // for the metric (the wall clock)
	defer func() { t.seconds.Add(time.Since(start).Seconds()) }()
	now := t.now()
	out := slices.Clone(msgs)
	var todo []mqttclient.Message // the signed messages, in order
	var at []int                  // their indexes in out
	for i, m := range out {
		if signed(m) {
			todo, at = append(todo, m), append(at, i)
		}
	}
	const size = signing.BatchSize
	batches := (len(todo) + size - 1) / size
	errs := make([]error, batches)
	fanout.Each(batches, signChunk, func(lo, hi int) {
		for b := lo; b < hi; b++ {
			errs[b] = t.keys.signBatch(todo[b*size:min((b+1)*size, len(todo))], now)
		}
	})
	if err := errors.Join(errs...); err != nil {
		t.failed.Inc()
		return nil, err
	}
	for j, i := range at {
		out[i] = todo[j]
	}
	t.signed.Add(float64(len(todo)))
	kept := out[:0]
	for i, m := range out {
		if len(m.Payload) > min(deliveryLimit, schema.MaxMessageSize) {
			t.tooLong(msgs[i])
			continue
		}
		kept = append(kept, m)
	}
	return kept, nil
}

// openSigning prepares signing when it is enabled: the keys, and the
// transport wrapper.
func (c *Controller) openSigning(t transport) (transport, error) {
	if !c.cfg.Signing {
		return t, nil
	}
	keys, err := openSigningKeys(c.cfg, c.store)
	if err != nil {
		return nil, err
	}
	c.signing = keys
	c.warnUndelegated()
	f := factory{c.metrics.reg}
	c.refusals = newRefusals(f.counterVec("edgeset_signing_refusals_total",
		"Signed documents agents refused, by reason (signing.Reason), as their node events report.", "reason"))
	return &signingTransport{
		transport: t, keys: keys, now: c.now,
		signed: f.counter("edgeset_signed_messages_total", "Messages the controller signed before publishing."),
		failed: f.counter("edgeset_signing_errors_total", "Publishes not made because a message could not be signed."),
		seconds: f.counter("edgeset_signing_seconds_total",
			"Time spent signing messages before publishing them (wall clock, batches signed in parallel)."),
		tooLong: func(m mqttclient.Message) {
			c.metrics.desiredTooLarge.Inc()
			c.log.Error("signed message too large; not published", "topic", m.Topic, "unsignedBytes", len(m.Payload))
		},
	}, nil
}

// signingRefreshLoop republishes everything every half signing validity,
// so that no retained document expires while the controller runs: the
// republish signs each message anew.
func (c *Controller) signingRefreshLoop(ctx context.Context) error {
	tick := time.NewTicker(c.cfg.SigningValidity / 2)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
			c.requestRepublish()
		}
	}
}

// withKeySet puts the key set message first among msgs, when signing has
// one.
func (c *Controller) withKeySet(msgs []mqttclient.Message) []mqttclient.Message {
	if c.signing == nil {
		return msgs
	}
	m, ok := c.signing.keySetMessage()
	if !ok {
		return msgs
	}
	return append([]mqttclient.Message{m}, msgs...)
}

// SigningStatus implements api.SigningBackend.
func (c *Controller) SigningStatus(ctx context.Context) (api.SigningStatus, error) {
	if c.signing == nil {
		return api.SigningStatus{}, nil
	}
	st := c.signing.status()
	st.Refusals = c.refusals.list()
	if c.cfg.SigningPeers != nil {
		peers, err := c.cfg.SigningPeers(ctx)
		if err != nil {
			return api.SigningStatus{}, fmt.Errorf("%w: the HA controllers' online keys: %v", api.ErrUnavailable, err)
		}
		now := c.now()
		for i := range peers {
			peers[i].Delegated = c.signing.delegated(peers[i].KeyID, now)
		}
		st.Controllers = peers
	}
	return st, nil
}

// warnUndelegated says, in the log and as a controller event, that the
// key set does not delegate this controller's online key: agents pinning
// the fleet root refuse what it signs until keys delegate runs (an HA
// standby that took over with a key nobody delegated).
func (c *Controller) warnUndelegated() {
	k := c.signing
	k.mu.Lock()
	version := uint64(0)
	if k.parsed != nil {
		version = k.parsed.Version
	}
	k.mu.Unlock()
	if version == 0 || k.delegated(k.signer.KeyID(), c.now()) {
		return
	}
	msg := fmt.Sprintf("key set version %d does not delegate this controller's online key %s (or its delegation expired): agents refuse what it signs; run edgesetctl keys delegate",
		version, k.signer.KeyID())
	c.log.Error("signing key not delegated", "keyID", k.signer.KeyID(), "keySetVersion", version)
	c.events.add("controller", schema.EventWarning, "SigningKeyNotDelegated", msg)
}

// PutKeySet implements api.SigningBackend: it adopts a key set signed by
// the fleet root and publishes it.
func (c *Controller) PutKeySet(ctx context.Context, env []byte) (api.SigningStatus, error) {
	if c.signing == nil {
		return api.SigningStatus{}, fmt.Errorf("%w: signing is not enabled (signing: true)", api.ErrInvalid)
	}
	ks, err := c.signing.setKeySet(env, c.now())
	if err != nil {
		return api.SigningStatus{}, err
	}
	c.events.add("controller", schema.EventNormal, "KeySetUpdated",
		fmt.Sprintf("key set version %d: %d online keys, %d revoked", ks.Version, len(ks.Keys), len(ks.Revoked)))
	if m, ok := c.signing.keySetMessage(); ok {
		if err := c.publishAll(ctx, []mqttclient.Message{m}); err != nil && !errors.Is(err, mqttclient.ErrNotConnected) {
			c.log.Warn("publish key set; republished on the next connection", "err", err)
		}
	}
	return c.SigningStatus(ctx)
}

// maxRefusalNodes bounds the nodes whose refusals the controller counts.
const maxRefusalNodes = 4096

// refusals counts the signed documents each node reported refusing.
// mu guards byNode.
type refusals struct {
	total  *prometheus.CounterVec
	mu     sync.Mutex
	byNode map[string]*api.NodeRefusals
}

func newRefusals(total *prometheus.CounterVec) *refusals {
	return &refusals{total: total, byNode: map[string]*api.NodeRefusals{}}
}

var refusalReasons = signing.Reasons()

// add counts ev if it reports a refused signed document.
func (r *refusals) add(node, reason, message string, at time.Time) {
	if r == nil || !slices.Contains(refusalReasons, reason) {
		return
	}
	r.total.WithLabelValues(reason).Inc()
	r.mu.Lock()
	defer r.mu.Unlock()
	n, ok := r.byNode[node]
	if !ok {
		if len(r.byNode) >= maxRefusalNodes {
			return
		}
		n = &api.NodeRefusals{Node: node, ByReason: map[string]int64{}}
		r.byNode[node] = n
	}
	n.ByReason[reason]++
	n.Total++
	n.Last, n.LastReason, n.LastMessage = at, reason, message
}

// list returns the counts, sorted by node.
func (r *refusals) list() []api.NodeRefusals {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]api.NodeRefusals, 0, len(r.byNode))
	for _, node := range sortedKeys(r.byNode) {
		n := *r.byNode[node]
		n.ByReason = maps.Clone(n.ByReason)
		out = append(out, n)
	}
	return out
}
