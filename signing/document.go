package signing

import (
	"bytes"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"time"
)

// AnyNode is the node of a document every node may use: a revision or a
// ConfigMap.
const AnyNode = "*"

// Statement is the signed payload of a document envelope: the message body
// as published without signing, and what it is bound to.
type Statement struct {
	// Topic is the MQTT topic the document is published on.
	Topic string `json:"topic"`
	// Node is the node the document is for, or AnyNode.
	Node string `json:"node"`
	// Generation is the node's desired-state generation; 0 for documents
	// that have none (content-addressed revisions and config objects).
	Generation uint64    `json:"generation"`
	IssuedAt   time.Time `json:"issuedAt"`
	ExpiresAt  time.Time `json:"expiresAt"`
	// Body is the message as it would be published unsigned.
	Body json.RawMessage `json:"body"`
}

// Signer signs documents with one online key. It is safe for concurrent
// use.
type Signer struct {
	priv ed25519.PrivateKey
	pub  ed25519.PublicKey
	id   string
}

// NewSigner returns a signer with priv.
func NewSigner(priv ed25519.PrivateKey) *Signer {
	pub, _ := priv.Public().(ed25519.PublicKey)
	return &Signer{priv: priv, pub: pub, id: KeyID(pub)}
}

// KeyID is the ID of the signer's key.
func (s *Signer) KeyID() string { return s.id }

// PublicKey is the signer's public key.
func (s *Signer) PublicKey() ed25519.PublicKey { return s.pub }

// Sign returns st in an envelope signed by the signer's key. st.Body must
// be one JSON value.
func (s *Signer) Sign(st Statement) ([]byte, error) {
	payload, err := json.Marshal(st)
	if err != nil {
		return nil, fmt.Errorf("encode statement for %s: %w", st.Topic, err)
	}
	return Seal(s.priv, PayloadTypeDocument, payload), nil
}

// Expect is what a receiver requires of a document besides its signature.
type Expect struct {
	// Topic is the topic the document arrived on.
	Topic string
	// Node is the receiving node; a document for AnyNode is accepted only
	// when Shared is set.
	Node   string
	Shared bool
	// MinGeneration is the lowest generation accepted: the last accepted
	// one (an equal generation is the same document again).
	MinGeneration uint64
}

// Verify checks that env is a document signed by a key ks delegates,
// unrevoked and unexpired at now, for exp's topic and node, of a
// generation of at least exp.MinGeneration, not expired at now, and
// returns its statement. Refusals wrap the sentinels of errors.go.
func Verify(ks *KeySet, env []byte, exp Expect, now time.Time) (Statement, error) {
	return Verifier{}.Verify(ks, env, exp, now)
}

// Verifier is Verify with its options. The zero Verifier is Verify.
type Verifier struct {
	// Cache, when set, answers signatures it has seen verify
	// (SignatureCache); everything else is checked as without it.
	Cache *SignatureCache
}

// Verify is the package's Verify, using v's options.
func (v Verifier) Verify(ks *KeySet, env []byte, exp Expect, now time.Time) (Statement, error) {
	st, _, err := verify(ks, env, exp, now, v.Cache)
	return st, err
}

// verify is Verify, also returning the statement's bytes as signed.
func verify(ks *KeySet, env []byte, exp Expect, now time.Time, cache *SignatureCache) (Statement, []byte, error) {
	e, err := DecodeEnvelope(env)
	if err != nil {
		if !IsEnvelope(env) {
			return Statement{}, nil, fmt.Errorf("%w on %s", ErrUnsigned, exp.Topic)
		}
		return Statement{}, nil, err
	}
	if e.PayloadType != PayloadTypeDocument {
		return Statement{}, nil, fmt.Errorf("%w: payloadType %q, want %q", ErrMalformed, e.PayloadType, PayloadTypeDocument)
	}
	if err := verifySignatures(ks, e, now, cache); err != nil {
		return Statement{}, nil, err
	}
	st, err := decodeStatement(e.Payload)
	if err != nil {
		return Statement{}, nil, err
	}
	return st, e.Payload, check(st, exp, now)
}

// verifySignatures accepts e when one signature is by a key of ks that is
// neither revoked nor expired at now and verifies; otherwise it names the
// most telling reason: a revoked key, an expired one, a bad signature, an
// unknown key.
func verifySignatures(ks *KeySet, e Envelope, now time.Time, cache *SignatureCache) error {
	if ks == nil {
		return fmt.Errorf("%w: %s (no key set accepted yet)", ErrUnknownKey, e.Signatures[0].KeyID)
	}
	var revoked, expired, bad string
	for _, s := range e.Signatures {
		if ks.IsRevoked(s.KeyID) {
			revoked = s.KeyID
			continue
		}
		k, ok := ks.Key(s.KeyID)
		if !ok {
			continue
		}
		if _, ok := verifiedBy(Envelope{PayloadType: e.PayloadType, Payload: e.Payload, Signatures: []Signature{s}}, k.ID, k.PublicKey, cache); !ok {
			bad = s.KeyID
			continue
		}
		if now.After(k.Expires) {
			expired = s.KeyID
			continue
		}
		return nil
	}
	switch {
	case revoked != "":
		return fmt.Errorf("%w: %s (key set version %d)", ErrRevokedKey, revoked, ks.Version)
	case bad != "":
		return fmt.Errorf("%w: by key %s", ErrBadSignature, bad)
	case expired != "":
		return fmt.Errorf("%w: %s", ErrExpiredKey, expired)
	}
	return fmt.Errorf("%w: %s (key set version %d)", ErrUnknownKey, e.Signatures[0].KeyID, ks.Version)
}

func decodeStatement(payload []byte) (Statement, error) {
	var st Statement
	if err := decodeStrict(payload, &st); err != nil {
		return Statement{}, fmt.Errorf("%w: statement: %v", ErrMalformed, err)
	}
	switch {
	case st.Topic == "":
		return Statement{}, fmt.Errorf("%w: statement: topic is required", ErrMalformed)
	case st.Node == "":
		return Statement{}, fmt.Errorf("%w: statement: node is required", ErrMalformed)
	case len(bytes.TrimSpace(st.Body)) == 0:
		return Statement{}, fmt.Errorf("%w: statement: body is required", ErrMalformed)
	case st.ExpiresAt.Before(st.IssuedAt):
		return Statement{}, fmt.Errorf("%w: statement: expiresAt %s is before issuedAt %s", ErrMalformed,
			st.ExpiresAt.Format(time.RFC3339), st.IssuedAt.Format(time.RFC3339))
	}
	return st, nil
}

// check applies exp and the expiry to a verified statement.
func check(st Statement, exp Expect, now time.Time) error {
	if st.Topic != exp.Topic {
		return fmt.Errorf("%w: signed for %s, received on %s", ErrWrongTopic, st.Topic, exp.Topic)
	}
	if st.Node != exp.Node && (st.Node != AnyNode || !exp.Shared) {
		return fmt.Errorf("%w: signed for node %q, received by %q", ErrWrongNode, st.Node, exp.Node)
	}
	if st.Generation < exp.MinGeneration {
		return fmt.Errorf("%w: generation %d, last accepted %d", ErrRollback, st.Generation, exp.MinGeneration)
	}
	if now.After(st.ExpiresAt) {
		return fmt.Errorf("%w: expired at %s, now %s", ErrExpired, st.ExpiresAt.Format(time.RFC3339), now.Format(time.RFC3339))
	}
	return nil
}
