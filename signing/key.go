package signing

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"strings"
)

// KeyIDLength is the number of hex digits of a key ID.
const KeyIDLength = 32

// KeyID returns the ID of an Ed25519 public key: the first 16 bytes of
// the SHA-256 of the key, in hex.
func KeyID(pub ed25519.PublicKey) string {
	sum := sha256.Sum256(pub)
	return hex.EncodeToString(sum[:])[:KeyIDLength]
}

// publicKeyPrefix starts the text form of a public key.
const publicKeyPrefix = "ed25519:"

// FormatPublicKey returns the one-line text form of pub,
// "ed25519:" followed by its standard base64 encoding: what keys init
// prints and what an agent's trust-root takes as a value.
func FormatPublicKey(pub ed25519.PublicKey) string {
	return publicKeyPrefix + base64.StdEncoding.EncodeToString(pub)
}

// ParsePublicKey reads a public key in the text form of FormatPublicKey or
// as a PEM "PUBLIC KEY" block (PKIX, as keys init writes it and openssl
// reads it).
func ParsePublicKey(s string) (ed25519.PublicKey, error) {
	s = strings.TrimSpace(s)
	if strings.HasPrefix(s, "-----BEGIN") {
		return parsePublicKeyPEM([]byte(s))
	}
	b64, ok := strings.CutPrefix(s, publicKeyPrefix)
	if !ok {
		return nil, fmt.Errorf("public key: want %q followed by base64, or a PEM PUBLIC KEY block", publicKeyPrefix)
	}
	raw, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		return nil, fmt.Errorf("public key: %w", err)
	}
	if len(raw) != ed25519.PublicKeySize {
		return nil, fmt.Errorf("public key: %d bytes, want %d", len(raw), ed25519.PublicKeySize)
	}
	return ed25519.PublicKey(raw), nil
}

// GenerateKey returns a new Ed25519 key pair from crypto/rand.
func GenerateKey() (ed25519.PrivateKey, error) {
	_, priv, err := ed25519.GenerateKey(nil)
	if err != nil {
		return nil, fmt.Errorf("generate Ed25519 key: %w", err)
	}
	return priv, nil
}
