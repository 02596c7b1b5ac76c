// Package schematest holds fixtures of package schema that the tests of
// other packages share: one table, one rule, every entry point tested
// against it.
package schematest

import (
	_ "embed"
	"strings"
)

//go:embed nodenames.txt
var nodeNames string

// NodeNames returns the node-name table of nodenames.txt: each name and
// whether it may identify a node (schema.ValidNodeName). Every entry
// point that takes a node name (schema, broker, agent, simulator,
// edgesetctl token) runs it.
func NodeNames() map[string]bool {
	names := map[string]bool{}
	for _, line := range strings.Split(nodeNames, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		verdict, name, _ := strings.Cut(line, " ")
		names[name] = verdict == "valid"
	}
	return names
}
