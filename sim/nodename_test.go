package sim

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/edgeset/edgeset/schema/schematest"
)

// TestTokenFileNodeNames: a token file is read exactly when its node names
// pass schema's table.
func TestTokenFileNodeNames(t *testing.T) {
	for name, valid := range schematest.NodeNames() {
		path := filepath.Join(t.TempDir(), "tokens")
		if err := os.WriteFile(path, []byte(name+" token\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := ReadTokenFile(path); (err == nil) != valid {
			t.Errorf("token file naming %q: err = %v, want accepted=%v", name, err, valid)
		}
	}
}
