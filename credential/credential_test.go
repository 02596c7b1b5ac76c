package credential

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

func TestLoadOrCreateFleetSecret(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	first, err := LoadOrCreateFleetSecret(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(first) != secretSize {
		t.Fatalf("secret has %d bytes, want %d", len(first), secretSize)
	}
	path := filepath.Join(dir, SecretFile)
	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if perm := info.Mode().Perm(); perm != 0o600 {
		t.Errorf("secret file mode %04o, want 0600", perm)
	}
	again, err := LoadOrCreateFleetSecret(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(first, again) {
		t.Error("second load returned a different secret")
	}
	other, err := LoadOrCreateFleetSecret(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(first, other) {
		t.Error("two data dirs got the same secret")
	}
}

func TestLoadFleetSecretRefusesBadFiles(t *testing.T) {
	tests := []struct {
		name    string
		content string
		mode    os.FileMode
		want    error
	}{
		{"world readable", "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff", 0o644, ErrSecretPermissions},
		{"group readable", "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff", 0o640, ErrSecretPermissions},
		{"not hex", "this is not a hex secret at all, not even close to one, no......", 0o600, ErrSecretInvalid},
		{"too short", "0011", 0o600, ErrSecretInvalid},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, SecretFile)
			if err := os.WriteFile(path, []byte(tc.content), tc.mode); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(path, tc.mode); err != nil { // bypass umask
				t.Fatal(err)
			}
			if _, err := LoadOrCreateFleetSecret(dir); !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
		})
	}
}

func TestTokens(t *testing.T) {
	s1 := bytes.Repeat([]byte{1}, secretSize)
	s2 := bytes.Repeat([]byte{2}, secretSize)
	if first, again := NodeToken(s1, "node-a"), NodeToken(s1, "node-a"); first != again {
		t.Error("NodeToken is not deterministic")
	}
	distinct := map[string]string{
		"node-a/s1":      NodeToken(s1, "node-a"),
		"node-b/s1":      NodeToken(s1, "node-b"),
		"node-a/s2":      NodeToken(s2, "node-a"),
		"controller/s1":  ControllerToken(s1),
		"node-ctl/s1":    NodeToken(s1, ControllerUsername),
		"fingerprint/s1": TokenFingerprint(NodeToken(s1, "node-a")),
	}
	seen := map[string]string{}
	for name, tok := range distinct {
		if prev, ok := seen[tok]; ok {
			t.Errorf("%s and %s share token %s", name, prev, tok)
		}
		seen[tok] = name
	}
	if tok := NodeToken(s1, "node-a"); len(tok) != 43 {
		t.Errorf("token %q has %d characters, want 43 (base64url of 32 bytes)", tok, len(tok))
	}
	if !TokenMatches(NodeToken(s1, "node-a"), []byte(NodeToken(s1, "node-a"))) {
		t.Error("TokenMatches refuses the right token")
	}
	if TokenMatches(NodeToken(s1, "node-a"), []byte(NodeToken(s1, "node-b"))) {
		t.Error("TokenMatches accepts another node's token")
	}
	if fp := TokenFingerprint("x"); !validFingerprint(fp) {
		t.Errorf("TokenFingerprint %q is not a valid fingerprint", fp)
	}
}

func TestParseRevocations(t *testing.T) {
	entries, bad := parseRevocations([]byte("# revoked\n\nnode-a\n  node-b  \nsha256:0011223344556677\nNot/A/Node\nsha256:xyz\n"))
	want := map[string]struct{}{"node-a": {}, "node-b": {}, "sha256:0011223344556677": {}}
	if !reflect.DeepEqual(entries, want) {
		t.Errorf("entries = %v, want %v", entries, want)
	}
	if wantBad := []string{"Not/A/Node", "sha256:xyz"}; !reflect.DeepEqual(bad, wantBad) {
		t.Errorf("bad = %v, want %v", bad, wantBad)
	}
	if err := Revoke(t.TempDir(), "Not/A/Node"); !errors.Is(err, ErrInvalidRevocation) {
		t.Errorf("Revoke invalid entry = %v, want ErrInvalidRevocation", err)
	}
}
