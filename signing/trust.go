package signing

import (
	"bytes"
	"crypto/ed25519"
	"fmt"
)

// Trust is what a receiver trusts: the pinned fleet root and the newest
// key set it accepted under it. The zero KeySet means none yet. Trust is
// a value owned by its receiver; it is not safe for concurrent use.
type Trust struct {
	Root ed25519.PublicKey
	// KeySet is the accepted key set, nil before the first.
	KeySet *KeySet
	// Envelope is the accepted key set's envelope, as received, for the
	// receiver to persist and restore with Restore.
	Envelope []byte
}

// NewTrust returns the trust of a receiver pinning root.
func NewTrust(root ed25519.PublicKey) *Trust { return &Trust{Root: root} }

// AcceptKeySet verifies env against the root and adopts it if it is newer
// than the accepted key set. It returns false, nil for the accepted key
// set again, and an error wrapping ErrNotRoot, ErrMalformed or
// ErrDowngrade (an older version, or another set of the same version) for
// anything else, which changes nothing.
func (t *Trust) AcceptKeySet(env []byte) (bool, error) {
	ks, err := OpenKeySet(t.Root, env)
	if err != nil {
		return false, err
	}
	if t.KeySet != nil {
		switch {
		case ks.Version < t.KeySet.Version:
			return false, fmt.Errorf("%w: version %d, accepted %d", ErrDowngrade, ks.Version, t.KeySet.Version)
		case ks.Version == t.KeySet.Version:
			old, _ := DecodeEnvelope(t.Envelope)
			e, _ := DecodeEnvelope(env)
			if bytes.Equal(old.Payload, e.Payload) {
				return false, nil
			}
			return false, fmt.Errorf("%w: another key set of version %d", ErrDowngrade, ks.Version)
		}
	}
	t.KeySet = &ks
	t.Envelope = append([]byte(nil), env...)
	return true, nil
}

// Restore adopts a key set envelope persisted from Envelope, verifying it
// again against the root.
func (t *Trust) Restore(env []byte) error {
	ks, err := OpenKeySet(t.Root, env)
	if err != nil {
		return fmt.Errorf("restore key set: %w", err)
	}
	t.KeySet = &ks
	t.Envelope = append([]byte(nil), env...)
	return nil
}
