package controller

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgeset/edgeset/controller/api"
	"github.com/edgeset/edgeset/schema"
)

// TestPrefetchLabelIsTheAgents: an operator cannot say a node's agent
// prefetches (an agent that does not would refuse its desired states),
// but may opt a node out.
func TestPrefetchLabelIsTheAgents(t *testing.T) {
	tc := startController(t, Config{})
	registerNode(t, tc, gateway("old", nil))
	registerNode(t, tc, gateway("new", map[string]string{schema.LabelPrefetch: "true"}))
	yes := "true"
	_, err := tc.api.UpdateNode(context.Background(), "old", api.NodePatch{Labels: map[string]*string{schema.LabelPrefetch: &yes}})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "labels[edgeset.io/prefetch]: set only by the node's agent")
	n, err := tc.api.UpdateNode(context.Background(), "new", api.NodePatch{Labels: map[string]*string{schema.LabelPrefetch: nil}})
	require.NoError(t, err, "removing it opts the node out")
	assert.NotContains(t, n.Labels, schema.LabelPrefetch)
}
