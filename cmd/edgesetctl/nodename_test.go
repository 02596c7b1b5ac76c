package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/edgeset/edgeset/credential"
	"github.com/edgeset/edgeset/schema/schematest"
)

// TestTokenCreateNodeNames: edgesetctl mints a node token exactly for the
// names schema's table allows; a..b and its kin get a usage error, not a
// token the broker would accept for a node whose messages are dropped.
func TestTokenCreateNodeNames(t *testing.T) {
	dir := t.TempDir()
	if _, err := credential.LoadOrCreateFleetSecret(dir); err != nil {
		t.Fatal(err)
	}
	for name, valid := range schematest.NodeNames() {
		var out, errOut bytes.Buffer
		code := run([]string{"token", "create", name, "--data-dir", dir}, nil, &out, &errOut)
		if (code == exitOK) != valid {
			t.Errorf("token create %q: exit %d (%s), want accepted=%v", name, code, strings.TrimSpace(errOut.String()), valid)
		}
	}
}
