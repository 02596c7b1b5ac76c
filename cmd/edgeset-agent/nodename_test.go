package main

import (
	"strings"
	"testing"

	"github.com/edgeset/edgeset/schema/schematest"
)

// TestNodeNameTable: the agent takes exactly the node names schema's table
// allows, from its flag and from the hostname.
func TestNodeNameTable(t *testing.T) {
	for name, valid := range schematest.NodeNames() {
		if _, err := nodeName(name, nil); (err == nil) != valid {
			t.Errorf("node-name %q: err = %v, want accepted=%v", name, err, valid)
		}
		if strings.ToLower(name) != name {
			continue // the hostname is lowercased first
		}
		host := func() (string, error) { return name, nil }
		if _, err := nodeName("", host); (err == nil) != valid {
			t.Errorf("hostname %q: err = %v, want accepted=%v", name, err, valid)
		}
	}
}
