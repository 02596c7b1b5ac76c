package sealing

import (
	"crypto/ecdh"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/edgeset/edgeset/internal/atomicfile"
)

// KeyFile is the name of a node's key file in the agent's data directory
// when its configuration names none.
const KeyFile = "node.key"

// PEM form of the key file: PKCS #8 "PRIVATE KEY" blocks, the current key
// first, then, during a rotation, the previous key with the header
// "Role: previous".
const (
	pemPrivateKey = "PRIVATE KEY"
	pemRole       = "Role"
	rolePrevious  = "previous"
)

// MarshalKeyring encodes r as the key file holds it.
func MarshalKeyring(r Keyring) ([]byte, error) {
	if r.Current == nil {
		return nil, errors.New("encode keyring: no current key")
	}
	out, err := marshalKey(r.Current, nil)
	if err != nil || r.Previous == nil {
		return out, err
	}
	prev, err := marshalKey(r.Previous, map[string]string{pemRole: rolePrevious})
	return append(out, prev...), err
}

func marshalKey(k *PrivateKey, headers map[string]string) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(k.ecdh)
	if err != nil {
		return nil, fmt.Errorf("encode private key %s: %w", k.KeyID(), err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: pemPrivateKey, Headers: headers, Bytes: der}), nil
}

// ParseKeyring decodes a key file's content.
func ParseKeyring(b []byte) (Keyring, error) {
	var r Keyring
	for n := 0; ; n++ {
		var block *pem.Block
		block, b = pem.Decode(b)
		if block == nil {
			break
		}
		if block.Type != pemPrivateKey {
			return Keyring{}, fmt.Errorf("block %d: PEM type %q, want %q", n+1, block.Type, pemPrivateKey)
		}
		k, err := parseKey(block.Bytes)
		if err != nil {
			return Keyring{}, fmt.Errorf("block %d: %w", n+1, err)
		}
		switch {
		case block.Headers[pemRole] == rolePrevious && r.Previous == nil:
			r.Previous = k
		case block.Headers[pemRole] == "" && r.Current == nil:
			r.Current = k
		default:
			return Keyring{}, fmt.Errorf("block %d: a second %s key", n+1, roleName(block.Headers[pemRole]))
		}
	}
	if r.Current == nil {
		return Keyring{}, errors.New("no current PRIVATE KEY block")
	}
	return r, nil
}

func roleName(role string) string {
	if role == "" {
		return "current"
	}
	return role
}

func parseKey(der []byte) (*PrivateKey, error) {
	k, err := x509.ParsePKCS8PrivateKey(der)
	if err != nil {
		return nil, fmt.Errorf("private key: %w", err)
	}
	x, ok := k.(*ecdh.PrivateKey)
	if !ok || x.Curve() != ecdh.X25519() {
		return nil, fmt.Errorf("private key: %T, want X25519", k)
	}
	return privateKey(x)
}

// ReadKeyFile reads a key file written by WriteKeyFile. It refuses a file
// that group or others may read or write.
func ReadKeyFile(path string) (Keyring, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return Keyring{}, fmt.Errorf("read node key %s: %w", path, err)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return Keyring{}, fmt.Errorf("read node key %s: mode %04o lets others at it; chmod 600 it", path, fi.Mode().Perm())
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return Keyring{}, fmt.Errorf("read node key %s: %w", path, err)
	}
	r, err := ParseKeyring(b)
	if err != nil {
		return Keyring{}, fmt.Errorf("read node key %s: %w", path, err)
	}
	return r, nil
}

// WriteKeyFile replaces path with r atomically, mode 0600, creating its
// directory (0700) when missing.
func WriteKeyFile(path string, r Keyring) error {
	b, err := MarshalKeyring(r)
	if err != nil {
		return fmt.Errorf("write node key %s: %w", path, err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("write node key %s: %w", path, err)
	}
	if err := atomicfile.Write(path, b, 0o600); err != nil {
		return fmt.Errorf("write node key %s: %w", path, err)
	}
	return nil
}

// LoadOrCreateKeyFile reads path, or, when it does not exist, writes a
// new key there; created reports the latter.
func LoadOrCreateKeyFile(path string) (r Keyring, created bool, err error) {
	r, err = ReadKeyFile(path)
	if !errors.Is(err, fs.ErrNotExist) {
		return r, false, err
	}
	k, err := GenerateKey()
	if err != nil {
		return Keyring{}, false, err
	}
	r = Keyring{Current: k}
	return r, true, WriteKeyFile(path, r)
}

// Rotate returns the keyring after a rotation: a new current key, and the
// current one kept as previous until the new one is registered. A
// previous key still held is dropped.
func (r Keyring) Rotate() (Keyring, error) {
	k, err := GenerateKey()
	if err != nil {
		return Keyring{}, err
	}
	return Keyring{Current: k, Previous: r.Current}, nil
}
