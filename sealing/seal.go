package sealing

import (
	"crypto/hpke"
	"errors"
	"fmt"

	"github.com/edgeset/edgeset/schema"
)

// Errors of opening a box, wrapped with details.
var (
	// ErrNotForKey: the box is sealed to a key the keyring does not hold
	// (a key the node had before a rotation, or another node's).
	ErrNotForKey = errors.New("sealed to a key this node does not hold")
	// ErrOpen: the box does not open with the key it names: sealed for
	// another node, another hash or purpose, or altered on the way.
	ErrOpen = errors.New("sealed box does not open")
	// ErrBox: the box is malformed (suite, key ID, length).
	ErrBox = errors.New("malformed sealed box")
)

// The HPKE suite of schema.SealSuite.
var (
	suiteKDF  = hpke.HKDFSHA256()
	suiteAEAD = hpke.ChaCha20Poly1305()
)

// Purposes bound into the HPKE info, so that a box made for one never
// opens as another.
const (
	purposeSecret = "edgeset/v1 sealed secret"
	purposeProof  = "edgeset/v1 node key proof"
)

// info is the HPKE info of a box: the purpose, then each part, separated
// by NUL bytes (no part holds one: node names, hashes and key IDs are
// DNS names and hex).
func info(purpose string, parts ...string) []byte {
	b := []byte(purpose)
	for _, p := range parts {
		b = append(b, 0)
		b = append(b, p...)
	}
	return b
}

// SealSecret encrypts plaintext, the JSON of node's SecretMessage of
// hash, to pub. Each call encapsulates a new ephemeral key, so two boxes
// of one plaintext differ.
func SealSecret(pub PublicKey, node, hash string, plaintext []byte) (schema.SealedBox, error) {
	return seal(pub, info(purposeSecret, node, hash, pub.id), plaintext)
}

func seal(pub PublicKey, info, plaintext []byte) (schema.SealedBox, error) {
	if pub.IsZero() {
		return schema.SealedBox{}, fmt.Errorf("%w: no public key", ErrKey)
	}
	ct, err := hpke.Seal(pub.kem, suiteKDF, suiteAEAD, info, plaintext)
	if err != nil {
		return schema.SealedBox{}, fmt.Errorf("seal to key %s: %w", pub.id, err)
	}
	return schema.SealedBox{Suite: schema.SealSuite, KeyID: pub.id, Ciphertext: ct}, nil
}

// Keyring is the private keys a node opens boxes with: its current key
// and, while a rotation is not yet registered with the controller, the
// one before. Current is required.
type Keyring struct {
	Current  *PrivateKey
	Previous *PrivateKey
}

// key returns the keyring's key of ID id, or nil.
func (r Keyring) key(id string) *PrivateKey {
	for _, k := range []*PrivateKey{r.Current, r.Previous} {
		if k != nil && k.KeyID() == id {
			return k
		}
	}
	return nil
}

// Holds reports whether the keyring holds the private key of ID id.
func (r Keyring) Holds(id string) bool { return r.key(id) != nil }

// OpenSecret decrypts box, sealed by SealSecret for node's Secret of
// hash, with the keyring's key it names. Its errors wrap ErrBox,
// ErrNotForKey or ErrOpen and never quote the content.
func (r Keyring) OpenSecret(node, hash string, box schema.SealedBox) ([]byte, error) {
	return r.open(box, func(keyID string) []byte { return info(purposeSecret, node, hash, keyID) })
}

func (r Keyring) open(box schema.SealedBox, infoFor func(keyID string) []byte) ([]byte, error) {
	if err := schema.ValidateSealedBox("sealed", box); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBox, err)
	}
	k := r.key(box.KeyID)
	if k == nil {
		return nil, fmt.Errorf("%w: the box is for key %s; this node holds %s", ErrNotForKey, box.KeyID, r.held())
	}
	pt, err := hpke.Open(k.kem, suiteKDF, suiteAEAD, infoFor(box.KeyID), box.Ciphertext)
	if err != nil {
		return nil, fmt.Errorf("%w with key %s", ErrOpen, box.KeyID)
	}
	return pt, nil
}

// held names the keyring's key IDs, for errors.
func (r Keyring) held() string {
	s := "no key"
	if r.Current != nil {
		s = r.Current.KeyID()
	}
	if r.Previous != nil {
		s += " and " + r.Previous.KeyID()
	}
	return s
}
