package main

import (
	"fmt"
	"strings"
)

// selector is a parsed label selector: every requirement must hold.
type selector []requirement

type requirement struct {
	key   string
	value string
	op    string // "=", "!=", "exists", "!exists"
}

// parseSelector parses kubectl's equality-based selectors: k=v, k==v, k!=v,
// k (exists) and !k (does not exist), comma-separated.
func parseSelector(s string) (selector, error) {
	var sel selector
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	for _, term := range strings.Split(s, ",") {
		term = strings.TrimSpace(term)
		r, err := parseRequirement(term)
		if err != nil {
			return nil, usageError{fmt.Errorf("selector %q: %w", s, err)}
		}
		sel = append(sel, r)
	}
	return sel, nil
}

func parseRequirement(term string) (requirement, error) {
	switch {
	case term == "":
		return requirement{}, fmt.Errorf("empty requirement")
	case strings.Contains(term, "!="):
		k, v, _ := strings.Cut(term, "!=")
		return requirement{key: k, value: v, op: "!="}, nil
	case strings.Contains(term, "=="):
		k, v, _ := strings.Cut(term, "==")
		return requirement{key: k, value: v, op: "="}, nil
	case strings.Contains(term, "="):
		k, v, _ := strings.Cut(term, "=")
		return requirement{key: k, value: v, op: "="}, nil
	case strings.HasPrefix(term, "!"):
		return requirement{key: term[1:], op: "!exists"}, nil
	case strings.ContainsAny(term, " ()"):
		return requirement{}, fmt.Errorf("set-based requirement %q is not supported; use k=v, k!=v, k or !k", term)
	}
	return requirement{key: term, op: "exists"}, nil
}

// matches reports whether labels satisfy every requirement.
func (sel selector) matches(labels map[string]string) bool {
	for _, r := range sel {
		v, ok := labels[r.key]
		switch r.op {
		case "=":
			if !ok || v != r.value {
				return false
			}
		case "!=":
			if ok && v == r.value {
				return false
			}
		case "exists":
			if !ok {
				return false
			}
		case "!exists":
			if ok {
				return false
			}
		}
	}
	return true
}
