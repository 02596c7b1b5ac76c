// Package datakey holds the data keys that encrypt the controller's
// Secrets at rest (store.SecretCipher): AES-256-GCM, each ciphertext
// under a key named by its ID so that keys can be rotated.
//
// Where the keys come from is the provider: a key file the operator
// keeps (FromFile, config key secret-encryption-key-file), or, by
// default, one key derived from the fleet secret (FromFleetSecret). A
// KMS would be one more provider: it unwraps the data keys at start and
// hands them to New; nothing else changes.
package datakey

import (
	"bufio"
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"
)

// KeySize is the size of a data key: AES-256.
const KeySize = 32

// ErrUnknownKey: a ciphertext under a key the set does not hold.
var ErrUnknownKey = errors.New("data key not held")

// Keys is a set of data keys, one of them current: new ciphertexts are
// under the current key, any held key decrypts. Safe for concurrent use.
type Keys struct {
	current string
	aeads   map[string]cipher.AEAD
	order   []string // IDs, the current first
}

// New returns the set of keys, keys[0] current. Each key is KeySize bytes.
func New(keys ...[]byte) (*Keys, error) {
	if len(keys) == 0 {
		return nil, errors.New("data keys: none given")
	}
	k := &Keys{aeads: map[string]cipher.AEAD{}}
	for i, key := range keys {
		if len(key) != KeySize {
			return nil, fmt.Errorf("data key %d: %d bytes, want %d", i+1, len(key), KeySize)
		}
		block, err := aes.NewCipher(key)
		if err != nil {
			return nil, fmt.Errorf("data key %d: %w", i+1, err)
		}
		aead, err := cipher.NewGCM(block)
		if err != nil {
			return nil, fmt.Errorf("data key %d: %w", i+1, err)
		}
		id := KeyID(key)
		if _, dup := k.aeads[id]; dup {
			return nil, fmt.Errorf("data key %d: the same key as an earlier one (ID %s)", i+1, id)
		}
		k.aeads[id] = aead
		k.order = append(k.order, id)
	}
	k.current = k.order[0]
	return k, nil
}

// KeyID names a data key without revealing it: 16 hex digits of the
// SHA-256 of a domain prefix and the key.
func KeyID(key []byte) string {
	sum := sha256.Sum256(append([]byte("edgeset data key\x00"), key...))
	return hex.EncodeToString(sum[:8])
}

// KeyID is the current key's ID.
func (k *Keys) KeyID() string { return k.current }

// IDs lists the held keys' IDs, the current first.
func (k *Keys) IDs() []string { return append([]string(nil), k.order...) }

// Encrypt seals plaintext under the current key with a random nonce,
// authenticating aad: nonce || ciphertext || tag.
func (k *Keys) Encrypt(plaintext, aad []byte) ([]byte, error) {
	aead := k.aeads[k.current]
	nonce := make([]byte, aead.NonceSize(), aead.NonceSize()+len(plaintext)+aead.Overhead())
	if _, err := rand.Read(nonce); err != nil {
		return nil, fmt.Errorf("nonce: %w", err)
	}
	return aead.Seal(nonce, nonce, plaintext, aad), nil
}

// Decrypt opens what Encrypt returned under key keyID.
func (k *Keys) Decrypt(keyID string, ciphertext, aad []byte) ([]byte, error) {
	aead, ok := k.aeads[keyID]
	if !ok {
		return nil, fmt.Errorf("%w: %s (held: %s)", ErrUnknownKey, keyID, strings.Join(k.order, ", "))
	}
	if len(ciphertext) < aead.NonceSize()+aead.Overhead() {
		return nil, fmt.Errorf("decrypt under data key %s: %d bytes, too short", keyID, len(ciphertext))
	}
	n := aead.NonceSize()
	pt, err := aead.Open(nil, ciphertext[:n], ciphertext[n:], aad)
	if err != nil {
		return nil, fmt.Errorf("decrypt under data key %s: authentication failed (altered, or moved from another record)", keyID)
	}
	return pt, nil
}

// FleetKey derives the data key of a controller without a key file from
// its fleet secret (HKDF-SHA256): every controller of an HA fleet holds
// the same fleet secret, so each reads what another wrote.
func FleetKey(fleet []byte) ([]byte, error) {
	key, err := hkdf.Key(sha256.New, fleet, nil, "edgeset secret encryption v1", KeySize)
	if err != nil {
		return nil, fmt.Errorf("derive the data key from the fleet secret: %w", err)
	}
	return key, nil
}

// FromFleetSecret is the set of the one key FleetKey derives.
func FromFleetSecret(fleet []byte) (*Keys, error) {
	key, err := FleetKey(fleet)
	if err != nil {
		return nil, err
	}
	return New(key)
}

// FromFile reads a key file: one key a line, the standard base64 of
// KeySize random bytes (openssl rand -base64 32), the first the current
// key; blank lines and lines starting with # are ignored. The file must
// not be readable or writable by group or others. The keys of also that
// the file does not hold are added after its own, to decrypt only (the
// fleet key, so that a store written before the key file is read).
func FromFile(path string, also ...[]byte) (*Keys, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("secret encryption key file: %w", err)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("secret encryption key file %s: mode %04o lets others at it; chmod 600 it", path, fi.Mode().Perm())
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("secret encryption key file: %w", err)
	}
	keys, err := parseKeyFile(b)
	if err != nil {
		return nil, fmt.Errorf("secret encryption key file %s: %w", path, err)
	}
	k, err := New(keys...)
	if err != nil {
		return nil, fmt.Errorf("secret encryption key file %s: %w", path, err)
	}
	for _, key := range also {
		if _, held := k.aeads[KeyID(key)]; !held {
			if k, err = New(append(keys, key)...); err != nil {
				return nil, err
			}
			keys = append(keys, key)
		}
	}
	return k, nil
}

// parseKeyFile returns the keys of a key file, in order. Errors name the
// line, never its content.
func parseKeyFile(b []byte) ([][]byte, error) {
	var keys [][]byte
	sc := bufio.NewScanner(bytes.NewReader(b))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		key, err := base64.StdEncoding.DecodeString(line)
		if err != nil || len(key) != KeySize {
			return nil, fmt.Errorf("line %d: not the base64 of %d bytes (make one with: openssl rand -base64 32)", n, KeySize)
		}
		keys = append(keys, key)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(keys) == 0 {
		return nil, errors.New("holds no key (make one with: openssl rand -base64 32)")
	}
	return keys, nil
}
