package sim

import (
	"bufio"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestTokenFileNodeNames: a token file is read exactly when its node names
// pass schema's table.
func TestTokenFileNodeNames(t *testing.T) {
	data, err := os.ReadFile("../schema/testdata/nodenames/names.txt")
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(strings.NewReader(string(data)))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		verdict, name, _ := strings.Cut(line, " ")
		path := filepath.Join(t.TempDir(), "tokens")
		if err := os.WriteFile(path, []byte(name+" token\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := ReadTokenFile(path); (err == nil) != (verdict == "valid") {
			t.Errorf("token file naming %q: err = %v, want %s", name, err, verdict)
		}
	}
}
