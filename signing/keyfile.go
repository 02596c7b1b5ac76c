package signing

import (
	"crypto/ed25519"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// PEM block types of the key files.
const (
	pemPrivateKey = "PRIVATE KEY" // PKCS #8
	pemPublicKey  = "PUBLIC KEY"  // PKIX
)

// MarshalPrivateKey encodes priv as a PKCS #8 PEM block.
func MarshalPrivateKey(priv ed25519.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		return nil, fmt.Errorf("encode private key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: pemPrivateKey, Bytes: der}), nil
}

// MarshalPublicKey encodes pub as a PKIX PEM block.
func MarshalPublicKey(pub ed25519.PublicKey) ([]byte, error) {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return nil, fmt.Errorf("encode public key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: pemPublicKey, Bytes: der}), nil
}

// ParsePrivateKey decodes a PKCS #8 PEM block holding an Ed25519 key.
func ParsePrivateKey(b []byte) (ed25519.PrivateKey, error) {
	block, _ := pem.Decode(b)
	if block == nil || block.Type != pemPrivateKey {
		return nil, errors.New("private key: no PEM PRIVATE KEY block")
	}
	k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("private key: %w", err)
	}
	priv, ok := k.(ed25519.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("private key: %T, want Ed25519", k)
	}
	return priv, nil
}

func parsePublicKeyPEM(b []byte) (ed25519.PublicKey, error) {
	block, _ := pem.Decode(b)
	if block == nil || block.Type != pemPublicKey {
		return nil, errors.New("public key: no PEM PUBLIC KEY block")
	}
	k, err := x509.ParsePKIXPublicKey(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("public key: %w", err)
	}
	pub, ok := k.(ed25519.PublicKey)
	if !ok {
		return nil, fmt.Errorf("public key: %T, want Ed25519", k)
	}
	return pub, nil
}

// ReadPrivateKeyFile reads a private key file written by WritePrivateKeyFile.
// It refuses a file that others may read.
func ReadPrivateKeyFile(path string) (ed25519.PrivateKey, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("read key %s: %w", path, err)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("read key %s: mode %04o lets others read it; chmod 600 it", path, fi.Mode().Perm())
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read key %s: %w", path, err)
	}
	priv, err := ParsePrivateKey(b)
	if err != nil {
		return nil, fmt.Errorf("read key %s: %w", path, err)
	}
	return priv, nil
}

// WritePrivateKeyFile writes priv to path, mode 0600; it never overwrites
// an existing file.
func WritePrivateKeyFile(path string, priv ed25519.PrivateKey) error {
	b, err := MarshalPrivateKey(priv)
	if err != nil {
		return err
	}
	return writeNew(path, b, 0o600)
}

// WritePublicKeyFile writes pub to path as PEM, mode 0644; it never
// overwrites an existing file.
func WritePublicKeyFile(path string, pub ed25519.PublicKey) error {
	b, err := MarshalPublicKey(pub)
	if err != nil {
		return err
	}
	return writeNew(path, b, 0o644)
}

func writeNew(path string, b []byte, mode os.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("write key %s: %w", path, err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return fmt.Errorf("write key %s: %w", path, err)
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(path)
		return fmt.Errorf("write key %s: %w", path, err)
	}
	return nil
}

// WriteKeySetFile replaces path with env atomically (a temporary file
// synced, then renamed), mode 0644: a key set is public.
func WriteKeySetFile(path string, env []byte) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("write key set %s: %w", path, err)
	}
	f, err := os.CreateTemp(dir, ".keyset-*")
	if err != nil {
		return fmt.Errorf("write key set %s: %w", path, err)
	}
	tmp := f.Name()
	_, err = f.Write(env)
	if err == nil {
		err = f.Chmod(0o644)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("write key set %s: %w", path, err)
	}
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		_ = d.Close()
	}
	return nil
}

// ReadKeySetFile reads a key set envelope written by WriteKeySetFile; a
// missing file is nil, nil.
func ReadKeySetFile(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read key set %s: %w", path, err)
	}
	return b, nil
}

// LoadPublicKey reads a public key given as its value (ParsePublicKey's
// forms) or as the path of a file holding one.
func LoadPublicKey(v string) (ed25519.PublicKey, error) {
	t := strings.TrimSpace(v)
	if strings.HasPrefix(t, publicKeyPrefix) || strings.HasPrefix(t, "-----BEGIN") {
		return ParsePublicKey(t)
	}
	b, err := os.ReadFile(v)
	if err != nil {
		return nil, fmt.Errorf("read public key: %w", err)
	}
	pub, err := ParsePublicKey(string(b))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", v, err)
	}
	return pub, nil
}
