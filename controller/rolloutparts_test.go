package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgeset/edgeset/controller/api"
	"github.com/edgeset/edgeset/controller/decider"
	"github.com/edgeset/edgeset/controller/rollout"
	"github.com/edgeset/edgeset/controller/store"
)

// storedParts reads key's stored rollout record as it is: the head and
// the entries by node.
func storedParts(t *testing.T, s *store.Store, key string) (rollout.State, map[string]rollout.NodeEntry) {
	t.Helper()
	var head rollout.State
	entries := map[string]rollout.NodeEntry{}
	found, err := s.GetRolloutParts(key, &head, func(node string, raw []byte) error {
		var e rollout.NodeEntry
		err := json.Unmarshal(raw, &e)
		entries[node] = e
		return err
	})
	require.NoError(t, err)
	require.True(t, found, "no rollout record for %s", key)
	return head, entries
}

// withProgress returns st with each node of assigned assigned the target
// at its instant, and each of pending pending with its message, through
// its entries.
func withProgress(st rollout.State, assigned map[string]time.Time, pending map[string]string) rollout.State {
	for node, at := range assigned {
		e, _ := st.Entry(node)
		e.AssignedAt = at
		st.SetEntry(node, e)
	}
	for node, msg := range pending {
		e, _ := st.Entry(node)
		e.Pending, e.HasPending = msg, true
		st.SetEntry(node, e)
	}
	return st
}

// stepDelta is a rollout step of key to st that names changed.
func stepDelta(key string, st rollout.State, changed ...string) decider.Decision {
	return decider.Decision{Rollouts: map[string]rollout.Delta{key: {State: st, StateChanged: true, Changed: changed}}}
}

// TestStoreDecisionWritesChangedEntries: a pass stores its rollout step's
// head and the entries of the nodes the step names, and leaves the other
// stored entries as they are.
func TestStoreDecisionWritesChangedEntries(t *testing.T) {
	c := newIdleController(t, Config{})
	_, err := c.ApplyManifests(context.Background(), "ds.yaml", []byte(dsYAML("one", "one:1")), api.ApplyOptions{})
	require.NoError(t, err)
	const key = "files/one"
	e, err := c.entry(key)
	require.NoError(t, err)
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	st := withProgress(rollout.State{Target: e.rec.CurrentRevision},
		map[string]time.Time{"n1": t0, "n2": t0, "n3": t0},
		map[string]string{"n1": "not yet available", "n2": "not yet available"})
	_, _, err = c.storeDecision(t0, decider.Decision{Rollouts: map[string]rollout.Delta{key: {State: st, StateChanged: true, AllChanged: true}}})
	require.NoError(t, err)
	c.recordRollouts(stepDelta(key, st))

	next := withProgress(rollout.State{Target: st.Target, Failed: map[string]string{"n2": "Failed: exit 1"}},
		map[string]time.Time{"n1": t0, "n2": t0, "n3": t0, "n4": t0}, map[string]string{"n4": "not yet available"})
	// n1's pending entry went too, but the step does not name it: a
	// partial write leaves what it does not name.
	_, _, err = c.storeDecision(t0, stepDelta(key, next, "n2", "n4"))
	require.NoError(t, err)
	got, found, whole, err := loadRollout(c.store, key)
	require.NoError(t, err)
	require.True(t, found)
	assert.False(t, whole)
	want := withProgress(rollout.State{Target: st.Target, Failed: map[string]string{"n2": "Failed: exit 1"}},
		map[string]time.Time{"n1": t0, "n2": t0, "n3": t0, "n4": t0},
		map[string]string{"n1": "not yet available", "n4": "not yet available"})
	assert.Equal(t, want, got)
	head, entries := storedParts(t, c.store, key)
	assert.False(t, head.HasEntries(), "the head holds no entries: %+v", head)
	assert.Len(t, entries, 4)
}

// TestWholeRolloutRecordLoadsAndIsReplaced: a rollout record of before
// schema 3 (the whole state in the head) loads after a restart, and the
// first write, even one that names a single node, replaces it with a
// head and every node's entry.
func TestWholeRolloutRecordLoadsAndIsReplaced(t *testing.T) {
	dir := t.TempDir()
	c := newIdleController(t, Config{DataDir: dir})
	_, err := c.ApplyManifests(context.Background(), "ds.yaml", []byte(dsYAML("one", "one:1")), api.ApplyOptions{})
	require.NoError(t, err)
	const key = "files/one"
	e, err := c.entry(key)
	require.NoError(t, err)
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	old := withProgress(rollout.State{Target: e.rec.CurrentRevision, Paused: true, PauseReason: "threshold",
		Failed: map[string]string{"n1": "Failed: exit 1"}, Away: map[string]bool{"n2": true}},
		map[string]time.Time{"n1": t0, "n2": t0}, nil)
	require.NoError(t, c.store.PutRolloutParts(key, old, nil, true), "write the whole state as the head, as before")
	c.closeResources()

	c = newIdleController(t, Config{DataDir: dir})
	e, err = c.entry(key)
	require.NoError(t, err)
	assert.Equal(t, old, e.rollout, "the whole record loads")
	assert.True(t, e.rolloutWhole)

	next := withProgress(e.rollout, map[string]time.Time{"n3": t0}, nil)
	_, _, err = c.storeDecision(t0, stepDelta(key, next, "n3"))
	require.NoError(t, err)
	c.recordRollouts(stepDelta(key, next, "n3"))
	head, entries := storedParts(t, c.store, key)
	assert.Equal(t, next.Head(), head, "the maps left the head")
	assert.Equal(t, map[string]rollout.NodeEntry{
		"n1": {AssignedAt: t0, Failed: "Failed: exit 1", HasFailed: true},
		"n2": {AssignedAt: t0, Away: true},
		"n3": {AssignedAt: t0},
	}, entries)
	e, err = c.entry(key)
	require.NoError(t, err)
	assert.False(t, e.rolloutWhole, "replaced: the next write may be partial")
}

// benchRolloutState is a rollout state of n nodes, each assigned the
// target, half of them pending.
func benchRolloutState(n int) rollout.State {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	st := rollout.State{Target: "rev-2", Stable: "rev-1"}
	for i := range n {
		e := rollout.NodeEntry{AssignedAt: t0.Add(time.Duration(i) * time.Millisecond)}
		if i%2 == 0 {
			e.Pending, e.HasPending = "not yet available", true
		}
		st.SetEntry(fmt.Sprintf("node-%06d", i), e)
	}
	return st
}

// BenchmarkStoreRolloutState stores a rollout state of
// EDGESET_BENCH_NODES (default 100,000) nodes, each assigned the target
// and half of them pending, in one transaction: whole, as every pass that
// changed it did before states were stored in parts, and as its head with
// the entries of the nodes a pass changed.
func BenchmarkStoreRolloutState(b *testing.B) {
	n := benchNodes(100_000)
	st := benchRolloutState(n)
	nodes := st.EntryNodes()
	b.Run("whole-value", func(b *testing.B) { // the one value of before, in a store of its own
		s, err := store.Open(filepath.Join(b.TempDir(), "store.db"), store.Options{})
		require.NoError(b, err)
		defer s.Close()
		for b.Loop() {
			if err := s.PutRolloutParts("fleet/exporter", st, nil, true); err != nil {
				b.Fatal(err)
			}
		}
	})
	s, err := store.Open(filepath.Join(b.TempDir(), "store.db"), store.Options{})
	require.NoError(b, err)
	defer s.Close()
	write := func(changed []string, replace bool) error {
		return s.Update(false, func(tx *store.Txn) error { return putRolloutTxn(tx, "fleet/exporter", st, changed, replace) })
	}
	require.NoError(b, write(nil, true))
	for _, changed := range []int{0, 100, 1000, n / 10} {
		name := fmt.Sprintf("changed=%d", changed)
		if changed == 0 {
			name = "whole-parts"
		}
		b.Run(name, func(b *testing.B) {
			k := 0
			for b.Loop() {
				start := k % (n - changed + 1)
				k += changed
				if err := write(nodes[start:start+changed], changed == 0); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkLoadRolloutState loads the rollout state of
// BenchmarkStoreRolloutState as a daemonset's entry does at start, after
// an apply and after a rollback: stored whole in one value, as before, and
// in parts.
func BenchmarkLoadRolloutState(b *testing.B) {
	st := benchRolloutState(benchNodes(100_000))
	s, err := store.Open(filepath.Join(b.TempDir(), "store.db"), store.Options{})
	require.NoError(b, err)
	defer s.Close()
	require.NoError(b, s.PutRolloutParts("fleet/before", st, nil, true))
	require.NoError(b, s.Update(false, func(tx *store.Txn) error { return putRolloutTxn(tx, "fleet/exporter", st, nil, true) }))
	for _, key := range []string{"fleet/before", "fleet/exporter"} {
		name := map[string]string{"fleet/before": "whole-value", "fleet/exporter": "parts"}[key]
		b.Run(name, func(b *testing.B) {
			var got rollout.State
			for b.Loop() {
				if got, _, _, err = loadRollout(s, key); err != nil {
					b.Fatal(err)
				}
			}
			if !got.Equal(st) {
				b.Fatal("the loaded state differs from the stored one")
			}
		})
	}
}
