package schema

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"
)

// TestIgnoredTableReachable writes, for every entry of the DaemonSet table,
// a manifest holding just that field and checks that decoding reports it as
// the entry says: a warning of the entry's class and reason at the field's
// path, or an error for a forbidden field.
func TestIgnoredTableReachable(t *testing.T) {
	for _, f := range daemonSetIgnored {
		t.Run(f.path, func(t *testing.T) {
			doc := map[string]any{"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": map[string]any{"name": "a"}}
			setPath(doc, f.path, "x")
			b, err := yaml.Marshal(doc)
			require.NoError(t, err)
			field := strings.ReplaceAll(f.path, "[*]", "[0]")
			_, warns, err := Decode("x.yaml", b)
			if f.forbidden {
				var ve *ValidationError
				require.True(t, errors.As(err, &ve))
				assert.Contains(t, ve.Errors, FieldError{File: "x.yaml", Line: ve.Errors[0].Line, Field: field, Message: f.reason}, "%v", err)
				return
			}
			var got []Warning
			for _, w := range warns {
				if w.Field == field {
					got = append(got, w)
				}
			}
			require.Len(t, got, 1, "warnings: %v", warns)
			assert.Equal(t, f.class, got[0].Class)
			assert.Equal(t, ignoredMessage(f), got[0].Message)
		})
	}
}

// setPath sets a generic path ("a.b[*].c") in doc, making a one-item list
// for each [*].
func setPath(doc map[string]any, path string, value any) {
	segs := strings.Split(path, ".")
	m := doc
	for i, seg := range segs {
		name, list := strings.CutSuffix(seg, "[*]")
		last := i == len(segs)-1
		switch {
		case last && !list:
			m[name] = value
		case list:
			items, _ := m[name].([]any)
			if len(items) == 0 {
				items = []any{map[string]any{}}
				m[name] = items
			}
			if last {
				items[0] = value
				return
			}
			m = items[0].(map[string]any)
		default:
			next, ok := m[name].(map[string]any)
			if !ok {
				next = map[string]any{}
				m[name] = next
			}
			m = next
		}
	}
}
