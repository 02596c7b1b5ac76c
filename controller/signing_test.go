package controller

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgeset/edgeset/controller/reconcile"
	"github.com/edgeset/edgeset/schema"
)

func TestDesiredGeneration(t *testing.T) {
	for _, gen := range []uint64{0, 1, 7, 1 << 40, ^uint64(0)} {
		m := desiredMessage("generation.example", reconcile.NodeDesired{Generation: gen,
			Instances: []schema.DesiredInstance{{DaemonSet: "ns/generation", Revision: "0123456789abcdef0123"}}})
		got, err := desiredGeneration(m.Payload)
		require.NoError(t, err)
		assert.Equal(t, gen, got)
	}
	_, err := desiredGeneration([]byte(`{"node":"x"}`))
	require.Error(t, err)
}
