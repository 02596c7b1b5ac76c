package sim

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"fmt"
	"os"
	"strings"

	"github.com/edgeset/edgeset/credential"
	"github.com/edgeset/edgeset/schema"
)

// minSecretBytes is the shortest fleet secret the broker accepts.
const minSecretBytes = 32

// TokenFunc returns the MQTT password of a node.
type TokenFunc func(node string) (string, error)

// ReadFleetSecret reads the controller's fleet secret file (DATA_DIR/
// fleet.secret) without ever creating or changing it, and refuses a file
// group or others may read, as the broker does.
func ReadFleetSecret(path string) ([]byte, error) {
	info, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("fleet secret: %w", err)
	}
	if perm := info.Mode().Perm(); perm&0o077 != 0 {
		return nil, fmt.Errorf("fleet secret %s: mode %04o, want 0600", path, perm)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("fleet secret: %w", err)
	}
	secret, err := hex.DecodeString(string(bytes.TrimSpace(raw)))
	if err != nil || len(secret) < minSecretBytes {
		return nil, fmt.Errorf("fleet secret %s: want at least %d hex-encoded bytes", path, minSecretBytes)
	}
	return secret, nil
}

// SecretTokens derives each node's token from the fleet secret.
func SecretTokens(secret []byte) TokenFunc {
	return func(node string) (string, error) { return credential.NodeToken(secret, node), nil }
}

// TokenFile is a list of node credentials: one "NAME TOKEN" a line, blank
// lines and lines starting with '#' ignored.
type TokenFile struct {
	// Names in file order.
	Names  []string
	tokens map[string]string
}

// ReadTokenFile reads and checks a token file; errors name the line.
func ReadTokenFile(path string) (*TokenFile, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("token file: %w", err)
	}
	tf := &TokenFile{tokens: map[string]string{}}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for line := 1; sc.Scan(); line++ {
		text := strings.TrimSpace(sc.Text())
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		fields := strings.Fields(text)
		switch {
		case len(fields) != 2:
			return nil, fmt.Errorf("token file %s line %d: want NAME TOKEN", path, line)
		case !schema.ValidNodeName(fields[0]):
			return nil, fmt.Errorf("token file %s line %d: %q is not a valid node name", path, line, fields[0])
		case tf.tokens[fields[0]] != "":
			return nil, fmt.Errorf("token file %s line %d: node %s listed twice", path, line, fields[0])
		}
		tf.Names = append(tf.Names, fields[0])
		tf.tokens[fields[0]] = fields[1]
	}
	if len(tf.Names) == 0 {
		return nil, fmt.Errorf("token file %s: no credentials", path)
	}
	return tf, sc.Err()
}

// Tokens returns the file's tokens; a node not in the file is an error.
func (tf *TokenFile) Tokens() TokenFunc {
	return func(node string) (string, error) {
		if tok, ok := tf.tokens[node]; ok {
			return tok, nil
		}
		return "", fmt.Errorf("token file has no token for node %s", node)
	}
}
