package credential

import (
	"bufio"
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/edgeset/edgeset/schema"
)

// ControllerUsername is the MQTT username of the controller identity, the only
// identity with full access. No node may carry this name
// (schema.ValidNodeName refuses it).
const ControllerUsername = schema.ReservedNodeName

// File names inside the data directory.
const (
	// SecretFile holds the fleet secret, hex encoded, mode 0600.
	SecretFile = "fleet.secret"
	// RevokedFile lists revoked nodes, one node name or token fingerprint a
	// line; blank lines and lines starting with '#' are ignored.
	RevokedFile = "revoked-tokens"
)

// secretSize is the length of a fleet secret in bytes.
const secretSize = 32

// Domain separation prefixes of the HMAC inputs: a node token can never be
// mistaken for an admin token of the same name.
const (
	nodeTokenPrefix  = "edgeset-node:"
	adminTokenPrefix = "edgeset-admin:"
	fingerprintTag   = "sha256:"
)

// LoadOrCreateFleetSecret returns the fleet secret kept in dataDir/fleet.secret,
// creating the directory (0700) and a new random 32-byte secret (file mode
// 0600) when there is none. An existing file readable or writable by group or
// others is refused with ErrSecretPermissions, and a file that does not hold
// at least 32 hex-encoded bytes with ErrSecretInvalid.
func LoadOrCreateFleetSecret(dataDir string) ([]byte, error) {
	path := filepath.Join(dataDir, SecretFile)
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return nil, fmt.Errorf("create data dir %s: %w", dataDir, err)
	}
	secret, err := readSecret(path)
	if !errors.Is(err, fs.ErrNotExist) {
		return secret, err
	}
	if err := createSecret(path); err != nil && !errors.Is(err, fs.ErrExist) {
		return nil, err
	}
	// Read back what is on disk: another process may have won the race.
	return readSecret(path)
}

// readSecret reads and checks an existing secret file.
func readSecret(path string) ([]byte, error) {
	info, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("load fleet secret %s: %w", path, err)
	}
	if perm := info.Mode().Perm(); perm&0o077 != 0 {
		return nil, fmt.Errorf("load fleet secret %s: mode %04o, want 0600 (run: chmod 600 %s): %w",
			path, perm, path, ErrSecretPermissions)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("load fleet secret %s: %w", path, err)
	}
	secret, err := hex.DecodeString(string(bytes.TrimSpace(raw)))
	if err != nil || len(secret) < secretSize {
		return nil, fmt.Errorf("load fleet secret %s: want at least %d hex-encoded bytes: %w",
			path, secretSize, ErrSecretInvalid)
	}
	return secret, nil
}

// createSecret writes a new random secret to path, failing with fs.ErrExist
// if the file appeared meanwhile.
func createSecret(path string) error {
	secret := make([]byte, secretSize)
	if _, err := rand.Read(secret); err != nil {
		return fmt.Errorf("generate fleet secret: %w", err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("create fleet secret %s: %w", path, err)
	}
	_, err = f.WriteString(hex.EncodeToString(secret) + "\n")
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(path)
		return fmt.Errorf("write fleet secret %s: %w", path, err)
	}
	return nil
}

// NodeToken returns the MQTT password of node: base64url (no padding) of
// HMAC-SHA256(secret, "edgeset-node:"+node). Anyone holding the fleet secret
// can derive it; the broker stores no per-node password.
func NodeToken(secret []byte, node string) string {
	return mac(secret, nodeTokenPrefix+node)
}

// ControllerToken returns the MQTT password of the controller identity
// (username ControllerUsername): HMAC-SHA256(secret,
// "edgeset-admin:edgeset-controller"), base64url without padding.
func ControllerToken(secret []byte) string {
	return mac(secret, adminTokenPrefix+ControllerUsername)
}

// TokenFingerprint returns "sha256:" and the first 16 hex digits of the
// SHA-256 of token: a name for a token that can be written to the revocation
// list or a log without disclosing the token.
func TokenFingerprint(token string) string {
	sum := sha256.Sum256([]byte(token))
	return fingerprintTag + hex.EncodeToString(sum[:8])
}

// mac returns base64url(HMAC-SHA256(secret, msg)).
func mac(secret []byte, msg string) string {
	h := hmac.New(sha256.New, secret)
	h.Write([]byte(msg))
	return base64.RawURLEncoding.EncodeToString(h.Sum(nil))
}

// TokenMatches reports in constant time whether password is the token want.
func TokenMatches(want string, password []byte) bool {
	return hmac.Equal([]byte(want), password)
}

// Revoke appends entry (a node name or a TokenFingerprint) to
// dataDir/revoked-tokens, creating the file with mode 0600. A running broker
// picks the change up on its next poll or on Reload.
func Revoke(dataDir, entry string) error {
	if !schema.ValidNodeName(entry) && !validFingerprint(entry) {
		return fmt.Errorf("revoke %q: %w", entry, ErrInvalidRevocation)
	}
	path := filepath.Join(dataDir, RevokedFile)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("open revocation list %s: %w", path, err)
	}
	_, err = f.WriteString(entry + "\n")
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write revocation list %s: %w", path, err)
	}
	return nil
}

// Revoked reports whether dataDir's revocation list names node or the
// fingerprint of its token under secret: such a token is refused by the
// broker, and since a node's token is derived from its name, minting it
// again gives the same refused token.
func Revoked(dataDir string, secret []byte, node string) (bool, error) {
	r := NewRevocations(filepath.Join(dataDir, RevokedFile))
	if _, _, err := r.Load(true); err != nil {
		return false, err
	}
	return r.Revoked(secret, node), nil
}

// validFingerprint reports whether s has the form TokenFingerprint returns.
func validFingerprint(s string) bool {
	digits, ok := strings.CutPrefix(s, fingerprintTag)
	if !ok || len(digits) != 16 {
		return false
	}
	_, err := hex.DecodeString(digits)
	return err == nil
}

// parseRevocations reads a revocation list: one entry a line, blank lines and
// '#' comments ignored. Malformed lines are returned in bad, not applied.
func parseRevocations(data []byte) (entries map[string]struct{}, bad []string) {
	entries = make(map[string]struct{})
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || strings.HasPrefix(line, "#"):
		case schema.ValidNodeName(line) || validFingerprint(line):
			entries[line] = struct{}{}
		default:
			bad = append(bad, line)
		}
	}
	return entries, bad
}
