package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/edgeset/edgeset/schema"
)

// nodeName returns name, or the lowercased hostname when name is empty,
// after checking it is a DNS-1123 subdomain (what the broker accepts as a
// node identity).
func nodeName(name string, hostname func() (string, error)) (string, error) {
	source := "node-name"
	if name == "" {
		h, err := hostname()
		if err != nil {
			return "", fmt.Errorf("node-name: not set and the hostname is unavailable: %w", err)
		}
		name, source = strings.ToLower(h), "node-name (from the hostname)"
	}
	if !schema.ValidNodeName(name) {
		return "", fmt.Errorf("%s: %q is not a DNS-1123 subdomain other than %q (lowercase letters, digits, '-' and '.', at most 253 characters, each dot-separated part starting and ending with a letter or digit)", source, name, schema.ReservedNodeName)
	}
	return name, nil
}

// parseLabels parses "key=value" entries; an error names every bad entry.
// Key and value syntax is checked later with the wire rules.
func parseLabels(entries []string) (map[string]string, error) {
	if len(entries) == 0 {
		return nil, nil
	}
	labels := make(map[string]string, len(entries))
	var errs []error
	for _, e := range entries {
		k, v, ok := strings.Cut(strings.TrimSpace(e), "=")
		old, dup := labels[k]
		switch {
		case !ok || k == "":
			errs = append(errs, fmt.Errorf("labels: entry %q: want key=value", e))
		case dup && old != v:
			errs = append(errs, fmt.Errorf("labels: entry %q: key %q given twice", e, k))
		default:
			labels[k] = v
		}
	}
	return labels, errors.Join(errs...)
}

// parseTaints parses "key[=value]:Effect" entries as kubectl taint does;
// an error names every bad entry.
func parseTaints(entries []string) ([]schema.Taint, error) {
	var taints []schema.Taint
	var errs []error
	for _, e := range entries {
		t, err := parseTaint(strings.TrimSpace(e))
		if err != nil {
			errs = append(errs, fmt.Errorf("taints: entry %q: %w", e, err))
			continue
		}
		taints = append(taints, t)
	}
	return taints, errors.Join(errs...)
}

func parseTaint(s string) (schema.Taint, error) {
	i := strings.LastIndex(s, ":")
	if i < 0 {
		return schema.Taint{}, errors.New("want key[=value]:Effect")
	}
	kv, effect := s[:i], s[i+1:]
	switch effect {
	case schema.TaintNoSchedule, schema.TaintPreferNoSchedule, schema.TaintNoExecute:
	default:
		return schema.Taint{}, fmt.Errorf("effect %q is not NoSchedule, PreferNoSchedule or NoExecute", effect)
	}
	key, value, _ := strings.Cut(kv, "=")
	if key == "" {
		return schema.Taint{}, errors.New("empty key")
	}
	return schema.Taint{Key: key, Value: value, Effect: effect}, nil
}
