package controller

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgeset/edgeset/mqttclient"
	"github.com/edgeset/edgeset/schema"
)

func telemetryMessage(t *testing.T, node string, load float64) []byte {
	t.Helper()
	b, err := schema.Encode(schema.Telemetry{SchemaVersion: schema.WireVersion, Node: node, Time: time.Now().UTC(), Load1: load,
		MemoryTotalBytes: 2 << 30, MemoryAvailableBytes: 1 << 30,
		Disks: []schema.DiskUsage{{Name: schema.DiskData, Path: "/var/lib/edgeset", SizeBytes: 8 << 30, FreeBytes: 5 << 30}}})
	require.NoError(t, err)
	return b
}

// TestTelemetryInGetNode: a registered node's telemetry shows in GetNode
// with its history; another node's topic, an unknown node and a malformed
// report change nothing; a deleted node's telemetry is forgotten.
func TestTelemetryInGetNode(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	var clock atomic.Int64 // unix nanoseconds
	clock.Store(now.UnixNano())
	tc := startController(t, Config{Clock: func() time.Time { return time.Unix(0, clock.Load()).UTC() },
		newTransport: countingTransportOf(func(mqttclient.Message) {})})
	announce(t, tc, gateway("gw", nil), true)
	ctx := context.Background()

	n, err := tc.GetNode(ctx, "gw")
	require.NoError(t, err)
	assert.Nil(t, n.Telemetry, "nothing reported yet")

	for i, load := range []float64{0.5, 1.5, 2.5} {
		clock.Store(now.Add(time.Duration(i) * time.Minute).UnixNano())
		tc.handleMessage(schema.NodeTopic("gw", schema.TopicTelemetry), telemetryMessage(t, "gw", load))
	}
	tc.handleMessage(schema.NodeTopic("gw", schema.TopicTelemetry), telemetryMessage(t, "other", 9))    // another node's report
	tc.handleMessage(schema.NodeTopic("ghost", schema.TopicTelemetry), telemetryMessage(t, "ghost", 9)) // never announced
	tc.handleMessage(schema.NodeTopic("gw", schema.TopicTelemetry), []byte(`{"schemaVersion":1,"node":"gw","load1":-1}`))

	n, err = tc.GetNode(ctx, "gw")
	require.NoError(t, err)
	require.NotNil(t, n.Telemetry)
	assert.Equal(t, 2.5, n.Telemetry.Latest.Load1)
	require.Len(t, n.Telemetry.History, 3)
	assert.Equal(t, now.Add(2*time.Minute), n.Telemetry.History[2].Time)
	require.NotNil(t, n.Telemetry.History[0].DataFreeBytes)
	assert.Equal(t, int64(5<<30), *n.Telemetry.History[0].DataFreeBytes)
	assert.Equal(t, 1, tc.telemetry.Len(), "the ghost holds nothing")

	require.NoError(t, tc.DeleteNode(ctx, "gw"))
	assert.Zero(t, tc.telemetry.Len())
}
