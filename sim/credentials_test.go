package sim

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/edgeset/edgeset/credential"
)

func TestReadFleetSecretMatchesBroker(t *testing.T) {
	dir := t.TempDir()
	want, err := credential.LoadOrCreateFleetSecret(dir)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, credential.SecretFile)
	before, _ := os.Stat(path)
	got, err := ReadFleetSecret(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) {
		t.Fatal("secret differs from the broker's")
	}
	if after, _ := os.Stat(path); !after.ModTime().Equal(before.ModTime()) {
		t.Error("reading the secret changed the file")
	}
	tok, _ := SecretTokens(got)("n1")
	if tok != credential.NodeToken(want, "n1") {
		t.Error("derived token differs from credential.NodeToken")
	}
}

func TestReadFleetSecretRefuses(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name, content string
		mode          os.FileMode
		wantErr       string
	}{
		{"missing", "", 0, "no such file"},
		{"world readable", strings.Repeat("ab", 32), 0o644, "want 0600"},
		{"not hex", "zz", 0o600, "hex-encoded"},
		{"too short", "abcd", 0o600, "at least 32"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "-"))
			if tc.mode != 0 {
				if err := os.WriteFile(path, []byte(tc.content), tc.mode); err != nil {
					t.Fatal(err)
				}
			}
			_, err := ReadFleetSecret(path)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("error = %v, want %q", err, tc.wantErr)
			}
		})
	}
}

func TestReadTokenFile(t *testing.T) {
	tests := []struct {
		name, content string
		wantErr       string
		wantNames     []string
	}{
		{"ok", "# fleet\nn1 tok1\n\nn2 tok2\n", "", []string{"n1", "n2"}},
		{"missing token", "n1\n", "line 1: want NAME TOKEN", nil},
		{"bad name", "N_1 tok\n", `line 1: "N_1" is not a valid node name`, nil},
		{"duplicate", "n1 a\nn1 b\n", "line 2: node n1 listed twice", nil},
		{"empty", "# nothing\n", "no credentials", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "tokens")
			if err := os.WriteFile(path, []byte(tc.content), 0o600); err != nil {
				t.Fatal(err)
			}
			tf, err := ReadTokenFile(path)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if strings.Join(tf.Names, ",") != strings.Join(tc.wantNames, ",") {
				t.Errorf("names %v, want %v", tf.Names, tc.wantNames)
			}
			if tok, err := tf.Tokens()("n2"); err != nil || tok != "tok2" {
				t.Errorf("token of n2 = %q, %v", tok, err)
			}
			if _, err := tf.Tokens()("n3"); err == nil {
				t.Error("a node missing from the file must be an error")
			}
		})
	}
}

func TestParseSourceRange(t *testing.T) {
	tests := []struct {
		in      string
		want    int
		wantErr string
	}{
		{"", 0, ""},
		{"127.0.0.2-127.0.0.254", 253, ""},
		{"127.0.0.9-127.0.0.9", 1, ""},
		{"127.0.0.9", 0, "want FIRST-LAST"},
		{"127.0.0.9-127.0.0.2", 0, "must not be below"},
		{"127.0.0.x-127.0.0.3", 0, "source range"},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParseSourceRange(tc.in)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || len(got) != tc.want {
				t.Fatalf("got %d addresses, %v; want %d", len(got), err, tc.want)
			}
		})
	}
}
