package signing

import (
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"slices"
	"time"
)

// Limits of a key set.
const (
	MaxKeys    = 16
	MaxRevoked = 256
)

// KeySet is the root-signed delegation of online keys. A higher Version
// replaces a lower one; an agent never goes back to a lower one.
type KeySet struct {
	Version uint64      `json:"version"`
	Keys    []OnlineKey `json:"keys"`
	// Revoked lists key IDs that must not be trusted, whichever key set
	// listed them before.
	Revoked []string `json:"revoked,omitempty"`
	// IssuedAt is informational: when the root signed it.
	IssuedAt time.Time `json:"issuedAt"`
}

// OnlineKey is one delegated online key.
type OnlineKey struct {
	ID        string            `json:"id"`
	PublicKey ed25519.PublicKey `json:"publicKey"`
	// Expires is when the delegation ends: documents it signs are refused
	// afterwards.
	Expires time.Time `json:"expires"`
}

// Key returns the key with id, if the set lists it and does not revoke it.
func (ks KeySet) Key(id string) (OnlineKey, bool) {
	if slices.Contains(ks.Revoked, id) {
		return OnlineKey{}, false
	}
	for _, k := range ks.Keys {
		if k.ID == id {
			return k, true
		}
	}
	return OnlineKey{}, false
}

// IsRevoked reports whether the set revokes id.
func (ks KeySet) IsRevoked(id string) bool { return slices.Contains(ks.Revoked, id) }

// Validate checks the set's shape: a version, 0 to MaxKeys keys each with
// a 32-byte public key whose ID matches, no key listed twice or both
// listed and revoked, at most MaxRevoked revoked IDs.
func (ks KeySet) Validate() error {
	if ks.Version == 0 {
		return fmt.Errorf("key set: version: must be at least 1")
	}
	if len(ks.Keys) > MaxKeys {
		return fmt.Errorf("key set: keys: %d, at most %d", len(ks.Keys), MaxKeys)
	}
	if len(ks.Revoked) > MaxRevoked {
		return fmt.Errorf("key set: revoked: %d, at most %d", len(ks.Revoked), MaxRevoked)
	}
	seen := map[string]bool{}
	for i, k := range ks.Keys {
		if len(k.PublicKey) != ed25519.PublicKeySize {
			return fmt.Errorf("key set: keys[%d].publicKey: %d bytes, want %d", i, len(k.PublicKey), ed25519.PublicKeySize)
		}
		if id := KeyID(k.PublicKey); k.ID != id {
			return fmt.Errorf("key set: keys[%d].id: %q, the key's ID is %q", i, k.ID, id)
		}
		if seen[k.ID] {
			return fmt.Errorf("key set: keys[%d]: key %s listed twice", i, k.ID)
		}
		if ks.IsRevoked(k.ID) {
			return fmt.Errorf("key set: keys[%d]: key %s is also revoked", i, k.ID)
		}
		if k.Expires.IsZero() {
			return fmt.Errorf("key set: keys[%d].expires: is required", i)
		}
		seen[k.ID] = true
	}
	for i, id := range ks.Revoked {
		if len(id) != KeyIDLength {
			return fmt.Errorf("key set: revoked[%d]: %q is not a key ID", i, id)
		}
	}
	return nil
}

// SignKeySet validates ks and returns it in an envelope signed by root.
func SignKeySet(root ed25519.PrivateKey, ks KeySet) ([]byte, error) {
	if err := ks.Validate(); err != nil {
		return nil, err
	}
	payload, err := json.Marshal(ks)
	if err != nil {
		return nil, fmt.Errorf("encode key set: %w", err)
	}
	return Seal(root, PayloadTypeKeySet, payload), nil
}

// OpenKeySet verifies that env is a key set signed by root and returns it.
func OpenKeySet(root ed25519.PublicKey, env []byte) (KeySet, error) {
	e, err := DecodeEnvelope(env)
	if err != nil {
		return KeySet{}, err
	}
	if e.PayloadType != PayloadTypeKeySet {
		return KeySet{}, fmt.Errorf("%w: payloadType %q, want %q", ErrMalformed, e.PayloadType, PayloadTypeKeySet)
	}
	found, ok := verifiedBy(e, KeyID(root), root, nil)
	if !ok {
		if found {
			return KeySet{}, fmt.Errorf("%w: the root's signature does not verify", ErrNotRoot)
		}
		return KeySet{}, fmt.Errorf("%w: signed by %s, the root is %s", ErrNotRoot, e.Signatures[0].KeyID, KeyID(root))
	}
	return ParseKeySet(e.Payload)
}

// ParseKeySet decodes and validates a key set's payload, without any
// signature check (OpenKeySet does both).
func ParseKeySet(payload []byte) (KeySet, error) {
	var ks KeySet
	if err := decodeStrict(payload, &ks); err != nil {
		return KeySet{}, fmt.Errorf("%w: key set: %v", ErrMalformed, err)
	}
	if err := ks.Validate(); err != nil {
		return KeySet{}, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	return ks, nil
}

// UnverifiedKeySet returns the key set in env without checking who signed
// it: for a controller that holds no root key and only shows or extends
// what it was given.
func UnverifiedKeySet(env []byte) (KeySet, error) {
	e, err := DecodeEnvelope(env)
	if err != nil {
		return KeySet{}, err
	}
	if e.PayloadType != PayloadTypeKeySet {
		return KeySet{}, fmt.Errorf("%w: payloadType %q, want %q", ErrMalformed, e.PayloadType, PayloadTypeKeySet)
	}
	return ParseKeySet(e.Payload)
}
