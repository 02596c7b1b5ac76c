package broker

import (
	"bufio"
	"os"
	"strings"
	"testing"
)

// nodeNameCases reads schema's table of node names, the one every entry
// point taking a node name runs.
func nodeNameCases(t *testing.T) map[string]bool {
	t.Helper()
	data, err := os.ReadFile("../schema/testdata/nodenames/names.txt")
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string]bool{}
	sc := bufio.NewScanner(strings.NewReader(string(data)))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		verdict, name, _ := strings.Cut(line, " ")
		cases[name] = verdict == "valid"
	}
	return cases
}

// TestNodeNamesAtTheBroker: the broker admits a node, accepts a
// revocation entry and grants a node's topics exactly for the names schema
// accepts (a..b, a.-b and a-.b among those refused), so no token works for a
// node whose messages the controller would drop.
func TestNodeNamesAtTheBroker(t *testing.T) {
	// The invalid names are failed logins: keep them from starting the
	// source's back-off.
	tb := startBroker(t, Options{Limits: Limits{AuthFailureLimit: 1000}})
	for name, valid := range nodeNameCases(t) {
		t.Run(name, func(t *testing.T) {
			c := client{user: name, pass: NodeToken(tb.secret, name), id: name}
			_, err := dial(t, tb.Addr(), c)
			if (err == nil) != valid {
				t.Errorf("CONNECT as %q: err = %v, want accepted=%v", name, err, valid)
			}
			if err := Revoke(t.TempDir(), name); (err == nil) != valid {
				t.Errorf("Revoke(%q) = %v, want accepted=%v", name, err, valid)
			}
			if name == ControllerUsername {
				return // the controller's own identity, with full access
			}
			if got := allowed(name, "edgeset/v1/nodes/"+name+"/status", true); got != valid {
				t.Errorf("allowed(%q, its status topic) = %v, want %v", name, got, valid)
			}
		})
	}
}
