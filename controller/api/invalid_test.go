package api

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgeset/edgeset/schema"
)

// TestInvalidNodeUpdateIsNotAManifest: a refused node change (a label key
// that is not valid, from `edgesetctl label`) is not answered "invalid
// manifest": there is no manifest; the answer names the node.
func TestInvalidNodeUpdateIsNotAManifest(t *testing.T) {
	c := newTestServer(t, &fakeBackend{updateNode: func(name string, _ NodePatch) (Node, error) {
		return Node{}, &schema.ValidationError{Errors: []schema.FieldError{{Field: "labels[bad key]", Message: "invalid label key"}}}
	}})
	v := "1"
	_, err := c.UpdateNode(context.Background(), "gw-1", NodePatch{Labels: map[string]*string{"bad key": &v}})
	require.ErrorIs(t, err, ErrInvalid)
	assert.NotContains(t, err.Error(), "invalid manifest")
	assert.Contains(t, err.Error(), "invalid change of node gw-1")
	assert.Contains(t, err.Error(), "labels[bad key]")
}
