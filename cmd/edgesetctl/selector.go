package main

import (
	"fmt"

	"github.com/edgeset/edgeset/schema"
)

// selector is a parsed -l/--selector: every requirement must hold.
type selector = schema.Selector

// selectorHelp describes -l/--selector in every command that takes it.
const selectorHelp = "label selector, as kubectl's: k=v, k==v, k!=v, k in (v1,v2), k notin (v1,v2), k, !k, k>N, k<N (comma-separated, all must match)"

// parseSelector parses kubectl's label selector grammar (equality- and
// set-based, see schema.ParseSelector); an error is a usage error naming
// the selector.
func parseSelector(s string) (selector, error) {
	sel, err := schema.ParseSelector(s)
	if err != nil {
		return nil, usageError{fmt.Errorf("selector %q: %w", s, err)}
	}
	return sel, nil
}
