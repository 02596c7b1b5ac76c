package broker

import (
	"testing"

	"github.com/edgeset/edgeset/credential"
	"github.com/edgeset/edgeset/schema/schematest"
)

// TestNodeNamesAtTheBroker: the broker admits a node, accepts a
// revocation entry and grants a node's topics exactly for the names schema
// accepts (a..b, a.-b and a-.b among those refused), so no token works for a
// node whose messages the controller would drop.
func TestNodeNamesAtTheBroker(t *testing.T) {
	// The invalid names are failed logins: keep them from starting the
	// source's back-off.
	tb := startBroker(t, Options{Limits: Limits{AuthFailureLimit: 1000}})
	for name, valid := range schematest.NodeNames() {
		t.Run(name, func(t *testing.T) {
			c := client{user: name, pass: credential.NodeToken(tb.secret, name), id: name}
			_, err := dial(t, tb.Addr(), c)
			if (err == nil) != valid {
				t.Errorf("CONNECT as %q: err = %v, want accepted=%v", name, err, valid)
			}
			if err := credential.Revoke(t.TempDir(), name); (err == nil) != valid {
				t.Errorf("credential.Revoke(%q) = %v, want accepted=%v", name, err, valid)
			}
			if name == credential.ControllerUsername {
				return // the controller's own identity, with full access
			}
			if got := allowed(name, "edgeset/v1/nodes/"+name+"/status", true); got != valid {
				t.Errorf("allowed(%q, its status topic) = %v, want %v", name, got, valid)
			}
		})
	}
}
