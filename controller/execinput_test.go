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
	"github.com/edgeset/edgeset/internal/checkfor"
	"github.com/edgeset/edgeset/schema"
)

// TestExecInputInOrder: an interactive session's input goes to the
// node's session input topic in order, each chunk once: a chunk sent
// again is a no-op, one ahead is a conflict, a bad one invalid; only the
// user who started the session, for its daemonset, may send, and nothing
// once it ended. Input past the session's rate waits its turn (here: is
// refused, as the caller's deadline comes first).
func TestExecInputInOrder(t *testing.T) {
	// The clock stands still, so the burst's tokens do not refill
	// however slowly the machine runs the test.
	frozen := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	tc := startController(t, Config{Clock: func() time.Time { return frozen }})
	b := tc.embeddedBroker(t)
	var mu sync.Mutex
	var got []schema.ExecInput
	topic := schema.ExecInputTopic("gw-1", "s1")
	require.NoError(t, b.Subscribe(topic, 99, func(_ string, payload []byte) {
		m, err := schema.DecodeExecInput(payload)
		require.NoError(t, err, "the controller publishes valid input")
		mu.Lock()
		got = append(got, m)
		mu.Unlock()
	}))
	_, err := tc.execInputs.add("s1", "gw-1", "edge/agent", "alice")
	require.NoError(t, err)
	ctx := context.Background()
	send := func(in api.ExecInput) error { return tc.ExecInput(ctx, "edge/agent", "s1", in, "alice") }

	require.NoError(t, send(api.ExecInput{Seq: 0, Data: []byte("ls\r")}))
	require.NoError(t, send(api.ExecInput{Seq: 0, Data: []byte("ls\r")}), "a retry is a no-op")
	require.NoError(t, send(api.ExecInput{Seq: 1, Resize: &schema.TerminalSize{Width: 80, Height: 24}}))
	assert.ErrorIs(t, send(api.ExecInput{Seq: 5, Data: []byte("x")}), api.ErrConflict)
	assert.ErrorIs(t, send(api.ExecInput{Seq: 2}), api.ErrInvalid, "no data, eof or resize")
	assert.ErrorIs(t, send(api.ExecInput{Seq: 2, Data: make([]byte, schema.MaxExecInputChunkBytes+1)}), api.ErrInvalid)
	assert.ErrorIs(t, tc.ExecInput(ctx, "edge/agent", "s1", api.ExecInput{Seq: 2, Data: []byte("x")}, "mallory"), api.ErrNotFound)
	assert.ErrorIs(t, tc.ExecInput(ctx, "edge/other", "s1", api.ExecInput{Seq: 2, Data: []byte("x")}, "alice"), api.ErrNotFound)
	assert.ErrorIs(t, tc.ExecInput(ctx, "edge/agent", "s9", api.ExecInput{Seq: 0, Data: []byte("x")}, "alice"), api.ErrNotFound)
	require.NoError(t, send(api.ExecInput{Seq: 2, EOF: true}))

	// The burst allows ExecInputBurstBytes at once; past it a chunk waits
	// for the rate (8 KiB: 125 ms), longer than this caller's deadline.
	seq := 3
	var refused error
	for range 20 { // 160 KiB: more than the burst
		short, cancel := context.WithTimeout(ctx, time.Millisecond)
		refused = tc.ExecInput(short, "edge/agent", "s1", api.ExecInput{Seq: seq, Data: make([]byte, schema.MaxExecInputChunkBytes)}, "alice")
		cancel()
		if refused != nil {
			break
		}
		seq++
	}
	require.ErrorIs(t, refused, api.ErrUnavailable, "a chunk past the burst waits for the rate")
	assert.Contains(t, refused.Error(), "would exceed context deadline")
	assert.GreaterOrEqual(t, (seq-3)*schema.MaxExecInputChunkBytes, schema.ExecInputBurstBytes-3*schema.ExecInputChunkCost-schema.MaxExecInputChunkBytes,
		"the burst went through at once")
	assert.Less(t, (seq-3)*schema.MaxExecInputChunkBytes, schema.ExecInputBurstBytes, "no more than the burst went through at once")

	tc.execInputs.remove("s1")
	assert.ErrorIs(t, send(api.ExecInput{Seq: seq, Data: []byte("x")}), api.ErrNotFound, "the session ended")

	checkfor.Eventually(t, wait, 10*time.Millisecond, func() error {
		mu.Lock()
		defer mu.Unlock()
		if len(got) != seq {
			return fmt.Errorf("%d chunks on %s, want %d", len(got), topic, seq)
		}
		return nil
	})
	mu.Lock()
	defer mu.Unlock()
	for i, m := range got {
		assert.Equal(t, i, m.Seq, "chunk %d in order", i)
		assert.Equal(t, "gw-1", m.Node)
		assert.Equal(t, "s1", m.ID)
	}
	assert.Equal(t, []byte("ls\r"), got[0].Data)
	assert.Equal(t, &schema.TerminalSize{Width: 80, Height: 24}, got[1].Resize)
	assert.True(t, got[2].EOF)
}

// TestInteractiveExecSessionsBounded: the controller holds at most
// maxInteractiveExecs interactive sessions.
func TestInteractiveExecSessionsBounded(t *testing.T) {
	var x execInputs
	for i := range maxInteractiveExecs {
		_, err := x.add(fmt.Sprint(i), "gw-1", "edge/agent", "alice")
		require.NoError(t, err)
	}
	_, err := x.add("one-more", "gw-1", "edge/agent", "alice")
	require.ErrorIs(t, err, api.ErrUnavailable)
	x.remove("0")
	_, err = x.add("one-more", "gw-1", "edge/agent", "alice")
	require.NoError(t, err, "a session that ended makes room")
}
