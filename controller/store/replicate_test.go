package store

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// recorder is a Replicator that keeps copies of the write sets it is
// handed and fails with err when set.
type recorder struct {
	mu  sync.Mutex
	got []WriteSet
	err error
}

func (r *recorder) replicate(_ context.Context, ws *WriteSet) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err != nil {
		return r.err
	}
	r.got = append(r.got, cloneWriteSet(ws))
	return nil
}

func (r *recorder) take() []WriteSet {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.got
	r.got = nil
	return out
}

func (r *recorder) fail(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.err = err
}

func cloneWriteSet(ws *WriteSet) WriteSet {
	out := WriteSet{Ops: make([]Op, len(ws.Ops))}
	for i, op := range ws.Ops {
		op.Bucket = append([]string(nil), op.Bucket...)
		op.Key = append([]byte(nil), op.Key...)
		op.Value = append([]byte(nil), op.Value...)
		out.Ops[i] = op
	}
	return out
}

// TestReplicateOpenMigrationsAreReplicated: Open's creation of the
// buckets and its schema version is a write set like any other.
func TestReplicateOpenMigrationsAreReplicated(t *testing.T) {
	rec := &recorder{}
	_, _ = openTemp(t, Options{Replicate: rec.replicate})
	sets := rec.take()
	require.Len(t, sets, 1, "Open's migrations are one transaction")
	var created []string
	var last Op
	for _, op := range sets[0].Ops {
		if op.Kind == OpCreateBucket {
			created = append(created, op.Bucket[0])
		}
		last = op
	}
	assert.Contains(t, created, string(bucketMeta))
	assert.Contains(t, created, string(bucketRolloutNodes))
	assert.Equal(t, Op{Kind: OpPut, Bucket: []string{"meta"}, Key: keySchemaVersion, Value: u64Key(codeSchemaVersion)}, last)
}

// TestReplicateRefusalRollsBack: a write the replicator refuses is not
// kept, and the method's error wraps the replicator's.
func TestReplicateRefusalRollsBack(t *testing.T) {
	rec := &recorder{}
	s, _ := openTemp(t, Options{Replicate: rec.replicate})
	rec.take()
	notLeader := errors.New("not the leader")
	rec.fail(notLeader)

	err := s.PutNode(NodeRecord{Name: "n1"})
	require.ErrorIs(t, err, notLeader)
	_, err = s.GetNode("n1")
	require.ErrorIs(t, err, ErrNotFound, "a refused write keeps nothing")

	err = s.Update(false, func(t *Txn) error { return t.PutOverrides("n2", NodeOverrides{}) })
	require.ErrorIs(t, err, notLeader, "Update's error wraps the replicator's")
	_, err = s.GetOverrides("n2")
	require.ErrorIs(t, err, ErrNotFound)

	rec.fail(nil)
	require.NoError(t, s.PutNode(NodeRecord{Name: "n1"}))
	sets := rec.take()
	require.Len(t, sets, 1)
	require.Len(t, sets[0].Ops, 1)
	op := sets[0].Ops[0]
	assert.Equal(t, OpPut, op.Kind)
	assert.Equal(t, []string{"nodes"}, op.Bucket)
	assert.Equal(t, "n1", string(op.Key))
}

// TestReplicateNothingWrittenCallsNoReplicator: transactions that write
// nothing (a no-op, a refusal of the store's logic, a dry run, a read)
// hand nothing to the replicator.
func TestReplicateNothingWrittenCallsNoReplicator(t *testing.T) {
	rec := &recorder{}
	s, _ := openTemp(t, Options{Replicate: rec.replicate})
	_, _, err := s.PutDaemonSet(testDaemonSet("a", "img:1"), t0)
	require.NoError(t, err)
	rec.take()

	_, _, err = s.PutDaemonSet(testDaemonSet("a", "img:1"), t0)
	require.NoError(t, err, "an unchanged daemonset")
	_, err = s.SetCurrentRevision("default/absent", "abc", t0)
	require.ErrorIs(t, err, ErrNotFound)
	require.NoError(t, s.Update(true, func(t *Txn) error { return t.PutOverrides("dry", NodeOverrides{}) }))
	_, err = s.ListNodes()
	require.NoError(t, err)
	assert.Empty(t, rec.take())
}

// TestReplicateThenCommitFailsIsBehind: a write the replicator took but
// the file failed to commit leaves the store refusing writes with
// ErrBehind (the replica holds more than the file); reads still serve.
func TestReplicateThenCommitFailsIsBehind(t *testing.T) {
	rec := &recorder{}
	s, _ := openTemp(t, Options{Replicate: rec.replicate})
	require.NoError(t, s.PutNode(NodeRecord{Name: "n1"}))
	diskFull := errors.New("no space left on device")
	s.FailWrites(func() error { return diskFull })
	require.ErrorIs(t, s.PutNode(NodeRecord{Name: "n2"}), diskFull)
	s.FailWrites(nil)
	sets := rec.take()
	require.Len(t, sets, 3, "Open's, n1's and n2's write sets reached the replica")

	err := s.PutNode(NodeRecord{Name: "n3"})
	require.ErrorIs(t, err, ErrBehind)
	require.ErrorIs(t, err, diskFull, "the error says which commit failed")
	assert.Empty(t, rec.take(), "nothing more is replicated")
	_, err = s.GetNode("n1")
	require.NoError(t, err)
}

// TestReplicateConcurrentWritesEachTheirOwn: with a replicator, writes
// that bbolt would coalesce (concurrent PutNode calls) each commit, and
// are replicated, on their own and once: one refused write does not
// replay the others (bbolt's Batch reruns the calls of a failed batch).
func TestReplicateConcurrentWritesEachTheirOwn(t *testing.T) {
	var mu sync.Mutex
	seen := map[string]int{}
	refused := errors.New("refused")
	s, _ := openTemp(t, Options{Replicate: func(_ context.Context, ws *WriteSet) error {
		mu.Lock()
		defer mu.Unlock()
		for _, op := range ws.Ops {
			if op.Kind == OpPut && op.Bucket[0] == "nodes" {
				seen[string(op.Key)]++
				if string(op.Key) == "n7" {
					return refused
				}
			}
		}
		return nil
	}})
	const n = 40
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			err := s.PutNode(NodeRecord{Name: fmt.Sprintf("n%d", i)})
			if i == 7 {
				assert.ErrorIs(t, err, refused)
			} else {
				assert.NoError(t, err)
			}
		})
	}
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	for i := range n {
		assert.Equal(t, 1, seen[fmt.Sprintf("n%d", i)], "node n%d replicated once", i)
	}
}
