package main

import (
	"bufio"
	"bytes"
	"os"
	"strings"
	"testing"

	"github.com/edgeset/edgeset/broker"
)

// TestTokenCreateNodeNames: edgesetctl mints a node token exactly for the
// names schema's table allows; a..b and its kin get a usage error, not a
// token the broker would accept for a node whose messages are dropped.
func TestTokenCreateNodeNames(t *testing.T) {
	dir := t.TempDir()
	if _, err := broker.LoadOrCreateFleetSecret(dir); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile("../../schema/testdata/nodenames/names.txt")
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
		var out, errOut bytes.Buffer
		code := run([]string{"token", "create", name, "--data-dir", dir}, nil, &out, &errOut)
		if (code == exitOK) != (verdict == "valid") {
			t.Errorf("token create %q: exit %d (%s), want %s", name, code, strings.TrimSpace(errOut.String()), verdict)
		}
	}
}
