package controller

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgeset/edgeset/controller/api"
	"github.com/edgeset/edgeset/schema"
)

// errDiskFull stands in for the file system's refusal.
var errDiskFull = errors.New("write edgeset.db: no space left on device")

// TestStoreWriteFailureMakesUnready: while store writes fail, /readyz
// fails naming the store and edgeset_store_writable is 0 with every
// failure counted; the next successful write clears both.
func TestStoreWriteFailureMakesUnready(t *testing.T) {
	tc := startController(t, Config{})
	<-tc.Synced()
	ctx := context.Background()
	require.NoError(t, tc.Ready(ctx))
	assert.Equal(t, 1.0, gaugeValue(tc.metrics.storeWritable))

	tc.store.FailWrites(func() error { return errDiskFull })
	_, err := tc.api.Apply(ctx, "ds.yaml", []byte(exporterYAML), false)
	require.Error(t, err)
	err = tc.Ready(ctx)
	require.ErrorIs(t, err, api.ErrUnavailable)
	assert.Contains(t, err.Error(), "store: ")
	assert.Contains(t, err.Error(), "no space left on device")
	assert.Contains(t, err.Error(), tc.store.Path())
	assert.Equal(t, 0.0, gaugeValue(tc.metrics.storeWritable))
	assert.GreaterOrEqual(t, counterValue(tc.metrics.storeWriteErrors), 1.0)

	tc.store.FailWrites(nil)
	tc.applyYAML(t, exporterYAML)
	require.NoError(t, tc.Ready(ctx), "a successful write clears the fault")
	assert.Equal(t, 1.0, gaugeValue(tc.metrics.storeWritable))
}

// TestFlushNodesKeepsDirtyOnFailure: node records whose write failed stay
// dirty and are stored by the next flush that succeeds.
func TestFlushNodesKeepsDirtyOnFailure(t *testing.T) {
	c, err := New(Config{DataDir: t.TempDir(), MQTTAddr: "127.0.0.1:0", APIAddr: "127.0.0.1:0"}, testLogger(t))
	require.NoError(t, err)
	t.Cleanup(c.closeResources)
	for i := range 3 {
		name := fmt.Sprintf("n%d", i)
		c.registry.ApplyStatus(schema.NodeStatus{Node: name}, time.Now())
		c.markNodeDirty(name)
	}
	c.store.FailWrites(func() error { return errDiskFull })
	c.flushNodes()
	recs, err := c.store.ListNodes()
	require.NoError(t, err)
	require.Empty(t, recs)

	c.store.FailWrites(nil)
	c.flushNodes()
	recs, err = c.store.ListNodes()
	require.NoError(t, err)
	assert.Len(t, recs, 3, "the records of the failed flush are written by the next one")
}

func gaugeValue(g interface{ Write(*dto.Metric) error }) float64 {
	var m dto.Metric
	if err := g.Write(&m); err != nil {
		return -1
	}
	return m.GetGauge().GetValue()
}
