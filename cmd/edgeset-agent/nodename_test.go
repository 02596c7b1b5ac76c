package main

import (
	"bufio"
	"os"
	"strings"
	"testing"
)

// TestNodeNameTable: the agent takes exactly the node names schema's table
// allows, from its flag and from the hostname.
func TestNodeNameTable(t *testing.T) {
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
		valid := verdict == "valid"
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
