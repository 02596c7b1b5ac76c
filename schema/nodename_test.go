package schema

import (
	"strings"
	"testing"

	"github.com/edgeset/edgeset/schema/schematest"
)

// TestNodeNameRule: the one rule, and every schema path that takes a node
// name (wire messages, node files) applies it.
func TestNodeNameRule(t *testing.T) {
	cases := schematest.NodeNames()
	cases[strings.Repeat("a", 253)] = true
	cases[strings.Repeat("a", 254)] = false
	cases[""] = false
	for name, valid := range cases {
		t.Run(name, func(t *testing.T) {
			if got := ValidNodeName(name); got != valid {
				t.Errorf("ValidNodeName(%q) = %v, want %v", name, got, valid)
			}
			if problem := NodeNameProblem(name); (problem == "") != valid {
				t.Errorf("NodeNameProblem(%q) = %q", name, problem)
			}
			payload := `{"schemaVersion":1,"node":` + quote(name) + `,"online":true,"session":1}`
			if _, err := DecodePresence([]byte(payload)); (err == nil) != valid {
				t.Errorf("DecodePresence with node %q: err = %v, want valid=%v", name, err, valid)
			}
		})
	}
}

func quote(s string) string { return `"` + s + `"` }
