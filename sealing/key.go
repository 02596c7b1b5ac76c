package sealing

import (
	"crypto/ecdh"
	"crypto/hpke"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
)

// KeyIDLength is the number of hex digits of a key ID.
const KeyIDLength = 32

// publicKeyPrefix starts the text form of a public key.
const publicKeyPrefix = "x25519:"

// ErrKey: a public or private key that is not a valid X25519 key.
var ErrKey = errors.New("invalid X25519 key")

// PublicKey is a node's X25519 public key. The zero value is no key.
type PublicKey struct {
	raw []byte
	kem hpke.PublicKey
	id  string
}

// ParsePublicKey reads the text form of String: "x25519:" followed by the
// standard base64 of the 32-byte key.
func ParsePublicKey(s string) (PublicKey, error) {
	b64, ok := strings.CutPrefix(strings.TrimSpace(s), publicKeyPrefix)
	if !ok {
		return PublicKey{}, fmt.Errorf("%w: want %q followed by base64", ErrKey, publicKeyPrefix)
	}
	raw, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		return PublicKey{}, fmt.Errorf("%w: %v", ErrKey, err)
	}
	return publicKeyFromBytes(raw)
}

func publicKeyFromBytes(raw []byte) (PublicKey, error) {
	pub, err := ecdh.X25519().NewPublicKey(raw)
	if err != nil {
		return PublicKey{}, fmt.Errorf("%w: %v", ErrKey, err)
	}
	kem, err := hpke.NewDHKEMPublicKey(pub)
	if err != nil {
		return PublicKey{}, fmt.Errorf("%w: %v", ErrKey, err)
	}
	return PublicKey{raw: pub.Bytes(), kem: kem, id: keyID(pub.Bytes())}, nil
}

// String is the one-line text form: "x25519:" and the standard base64 of
// the key. It is what a node registers and what the API shows.
func (p PublicKey) String() string {
	if p.IsZero() {
		return ""
	}
	return publicKeyPrefix + base64.StdEncoding.EncodeToString(p.raw)
}

// KeyID is the key's ID: the first 16 bytes of the SHA-256 of the raw
// key, in hex (as signing's key IDs).
func (p PublicKey) KeyID() string { return p.id }

// IsZero reports whether p is no key.
func (p PublicKey) IsZero() bool { return p.raw == nil }

// Equal reports whether p and q are the same key.
func (p PublicKey) Equal(q PublicKey) bool { return p.id == q.id && !p.IsZero() && !q.IsZero() }

func keyID(raw []byte) string {
	sum := sha256.Sum256(raw)
	return hex.EncodeToString(sum[:])[:KeyIDLength]
}

// PrivateKey is a node's X25519 private key. It never leaves the device.
type PrivateKey struct {
	ecdh *ecdh.PrivateKey
	kem  hpke.PrivateKey
	pub  PublicKey
}

// GenerateKey returns a new X25519 key pair from crypto/rand.
func GenerateKey() (*PrivateKey, error) {
	k, err := ecdh.X25519().GenerateKey(nil)
	if err != nil {
		return nil, fmt.Errorf("generate X25519 key: %w", err)
	}
	return privateKey(k)
}

func privateKey(k *ecdh.PrivateKey) (*PrivateKey, error) {
	kem, err := hpke.NewDHKEMPrivateKey(k)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrKey, err)
	}
	pub, err := publicKeyFromBytes(k.PublicKey().Bytes())
	if err != nil {
		return nil, err
	}
	return &PrivateKey{ecdh: k, kem: kem, pub: pub}, nil
}

// Public returns the key's public half.
func (k *PrivateKey) Public() PublicKey { return k.pub }

// KeyID is the ID of the key's public half.
func (k *PrivateKey) KeyID() string { return k.pub.id }
