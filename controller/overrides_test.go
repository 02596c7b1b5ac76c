package controller

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgeset/edgeset/controller/api"
	"github.com/edgeset/edgeset/schema"
)

// registerNode makes the controller know a node, as its status message
// would.
func registerNode(t testing.TB, tc *testController, st schema.NodeStatus) {
	t.Helper()
	tc.registry.ApplyStatus(st, time.Now())
}

// TestConcurrentNodePatchesKeepEveryChange: 20 parallel PATCHes of one
// node, each with its own label and taint, keep all 20 of each.
func TestConcurrentNodePatchesKeepEveryChange(t *testing.T) {
	tc := startController(t, Config{})
	registerNode(t, tc, gateway("n1", nil))
	const n = 20
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			v := fmt.Sprintf("v%d", i)
			_, err := tc.api.UpdateNode(context.Background(), "n1", api.NodePatch{
				Labels:    map[string]*string{fmt.Sprintf("k%d", i): &v},
				AddTaints: []schema.Taint{{Key: fmt.Sprintf("t%d", i), Effect: schema.TaintNoSchedule}},
			})
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	node, err := tc.api.GetNode(context.Background(), "n1")
	require.NoError(t, err)
	o, err := tc.store.GetOverrides("n1")
	require.NoError(t, err)
	for i := range n {
		assert.Equal(t, fmt.Sprintf("v%d", i), node.Labels[fmt.Sprintf("k%d", i)], "label k%d", i)
		assert.Contains(t, o.Labels, fmt.Sprintf("k%d", i), "stored label k%d", i)
		assert.True(t, hasTaint(node.Taints, fmt.Sprintf("t%d", i), schema.TaintNoSchedule), "taint t%d", i)
	}
	assert.Len(t, o.Taints, n, "stored taints")
}

// TestLabelOverwrite: changing the value of a label the node has (announced
// or set by an override) is refused without Overwrite, naming the label and
// its value as kubectl does, and changes nothing; the same value, a new
// label and a removal need no Overwrite.
func TestLabelOverwrite(t *testing.T) {
	tc := startController(t, Config{})
	registerNode(t, tc, gateway("n1", map[string]string{"zone": "a"}))
	ctx := context.Background()
	str := func(s string) *string { return &s }

	_, err := tc.api.UpdateNode(ctx, "n1", api.NodePatch{Labels: map[string]*string{"zone": str("b"), "new": str("x")}})
	require.ErrorIs(t, err, api.ErrInvalid)
	assert.Contains(t, err.Error(), "'zone' already has a value (a), and --overwrite is false")
	node, err := tc.api.GetNode(ctx, "n1")
	require.NoError(t, err)
	assert.Equal(t, "a", node.Labels["zone"])
	assert.NotContains(t, node.Labels, "new", "a refused patch changes nothing")

	_, err = tc.api.UpdateNode(ctx, "n1", api.NodePatch{Labels: map[string]*string{"zone": str("a"), "new": str("x")}})
	require.NoError(t, err, "the same value and a new label need no --overwrite")
	_, err = tc.api.UpdateNode(ctx, "n1", api.NodePatch{Labels: map[string]*string{"new": str("y")}})
	require.ErrorContains(t, err, "'new' already has a value (x)", "a label set by an override counts too")

	node, err = tc.api.UpdateNode(ctx, "n1", api.NodePatch{Labels: map[string]*string{"zone": str("b")}, Overwrite: true})
	require.NoError(t, err)
	assert.Equal(t, "b", node.Labels["zone"])
	node, err = tc.api.UpdateNode(ctx, "n1", api.NodePatch{Labels: map[string]*string{"zone": nil}})
	require.NoError(t, err, "removing a label needs no --overwrite")
	assert.NotContains(t, node.Labels, "zone")
}

// TestRemoveTaintRefsAreValidated: a removeTaints entry that is not
// "key:effect" or "key" (kubectl's "key=value:Effect-" sent raw, an unknown
// effect) is refused naming the entry, and changes nothing, rather than
// recording a removal that removes nothing.
func TestRemoveTaintRefsAreValidated(t *testing.T) {
	tc := startController(t, Config{})
	registerNode(t, tc, gateway("n1", nil))
	_, err := tc.api.UpdateNode(context.Background(), "n1", api.NodePatch{
		AddTaints: []schema.Taint{{Key: "maintenance", Value: "true", Effect: schema.TaintNoExecute}},
	})
	require.NoError(t, err)
	for _, tc2 := range []struct{ ref, want string }{
		{"maintenance=true:NoExecute", "without a value"},
		{"maintenance:NoRun", "effect must be"},
		{"bad key:NoExecute", "removeTaints[0]"},
	} {
		_, err := tc.api.UpdateNode(context.Background(), "n1", api.NodePatch{RemoveTaints: []string{tc2.ref}})
		require.Error(t, err, tc2.ref)
		assert.Contains(t, err.Error(), tc2.want, tc2.ref)
	}
	n, err := tc.api.GetNode(context.Background(), "n1")
	require.NoError(t, err)
	assert.Contains(t, fmt.Sprint(n.Taints), "maintenance", "the taint is still there")
	for _, ok := range []string{"maintenance:NoExecute", "maintenance"} {
		_, err := tc.api.UpdateNode(context.Background(), "n1", api.NodePatch{RemoveTaints: []string{ok}})
		assert.NoError(t, err, ok)
	}
}
