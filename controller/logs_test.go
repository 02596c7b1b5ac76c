package controller

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgeset/edgeset/controller/api"
	"github.com/edgeset/edgeset/internal/checkfor"
	"github.com/edgeset/edgeset/schema"
)

// TestLogsSilentNode: a node that never answers is reported with 504, and
// the stream is cancelled on it.
func TestLogsSilentNode(t *testing.T) {
	tc := startController(t, Config{logAnswerTimeout: 200 * time.Millisecond})
	startNode(t, tc.brokerURL(), tc.secret, gateway("gw-1", nil))
	tc.applyYAML(t, exporterYAML)
	checkfor.Eventually(t, wait, 20*time.Millisecond, func() error {
		_, err := tc.GetNode(context.Background(), "gw-1")
		return err
	})
	_, err := tc.api.Logs(context.Background(), api.LogsRequest{DaemonSet: "monitoring/exporter", Node: "gw-1"})
	var se *api.StatusError
	require.ErrorAs(t, err, &se)
	assert.Equal(t, 504, se.Code)
	assert.ErrorIs(t, err, api.ErrTimeout)
	assert.Contains(t, err.Error(), "node gw-1 did not answer; is it online?")

	_, err = tc.api.Logs(context.Background(), api.LogsRequest{DaemonSet: "monitoring/exporter", Node: "gw-2"})
	assert.ErrorIs(t, err, api.ErrNotFound)
	assert.Contains(t, err.Error(), "did you mean gw-1?")
	_, err = tc.api.Logs(context.Background(), api.LogsRequest{DaemonSet: "monitoring/exporters", Node: "gw-1"})
	assert.ErrorIs(t, err, api.ErrNotFound)
	assert.Contains(t, err.Error(), "did you mean monitoring/exporter?")
}

// TestLogReaderOrdersChunks: redelivered chunks are skipped, lost ones
// noted, chunks from another node rejected, and an error chunk ends the
// stream with its message.
func TestLogReaderOrdersChunks(t *testing.T) {
	var h hub[schema.LogChunk]
	s := h.add("id1", "gw-1")
	r := &logReader{ctx: context.Background(), id: "id1", node: "gw-1", stream: s, answer: wait, closed: true}
	chunk := func(seq int, data string, eof bool, msg string) schema.LogChunk {
		return schema.LogChunk{SchemaVersion: schema.WireVersion, Node: "gw-1", ID: "id1", Seq: seq, Data: data, EOF: eof || msg != "", Error: msg}
	}
	require.NoError(t, h.deliver("gw-1", "id1", chunk(0, "a\n", false, "")))
	require.NoError(t, h.deliver("gw-1", "id1", chunk(0, "a\n", false, "")))
	require.Error(t, h.deliver("gw-2", "id1", chunk(1, "evil\n", false, "")))
	require.NoError(t, h.deliver("gw-1", "id1", chunk(2, "c\n", false, "")))
	require.NoError(t, h.deliver("gw-1", "id1", chunk(3, "", false, "engine went away")))
	late := chunk(0, "", true, "")
	late.ID = "id2"
	require.NoError(t, h.deliver("gw-3", late.ID, late), "chunk of an unknown stream")
	text, err := io.ReadAll(r)
	assert.Equal(t, "a\n\n[edgeset: 1 log chunk(s) lost]\nc\n", string(text))
	assert.EqualError(t, err, "node gw-1: engine went away")
	assert.False(t, errors.Is(err, io.EOF))
}

// TestChunkErrorClassifies: what a node answers before any log is a
// missing thing (404) or the node failing (503).
func TestChunkErrorClassifies(t *testing.T) {
	tests := []struct {
		msg string
		is  error
	}{
		{"no instance of daemonset edge/x on this node", api.ErrNotFound},
		{`daemonset edge/x has no container "y" on this node (containers: main)`, api.ErrNotFound},
		{`container "main" of daemonset edge/x has no terminated run on this node`, api.ErrNotFound},
		{"list containers: engine down", api.ErrUnavailable},
	}
	for _, tc := range tests {
		err := chunkError("gw-1", tc.msg)
		assert.ErrorIs(t, err, tc.is, tc.msg)
		assert.Contains(t, err.Error(), "node gw-1: "+tc.msg)
	}
}
