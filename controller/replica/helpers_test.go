package replica

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.etcd.io/bbolt"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/edgeset/edgeset/controller/store"
	"github.com/edgeset/edgeset/internal/etcdtest"
	"github.com/edgeset/edgeset/schema"
)

var t0 = time.Date(2025, 3, 4, 5, 6, 7, 0, time.UTC)

// fence is a Fence for tests without an election: it nests the
// transaction in an outer one, as leader.Term does (so etcd's limits on
// nested transactions apply), conditioned on nothing. fail, when set, is
// asked before each request (n counts from 1) and may fail it before it
// is sent (before) or after etcd applied it (after: a response lost).
type fence struct {
	cli *clientv3.Client

	mu   sync.Mutex // guards the fields below
	n    int
	fail func(n int) (before, after bool)
}

var _ Fence = (*fence)(nil)

var (
	errInjectedBefore = errors.New("injected: request not sent")
	errInjectedAfter  = errors.New("injected: response lost")
)

func (f *fence) Txn(ctx context.Context, cmps []clientv3.Cmp, thenOps, elseOps []clientv3.Op) (*clientv3.TxnResponse, error) {
	f.mu.Lock()
	f.n++
	n := f.n
	var before, after bool
	if f.fail != nil {
		before, after = f.fail(n)
	}
	f.mu.Unlock()
	if before {
		return nil, errInjectedBefore
	}
	always := clientv3.Compare(clientv3.CreateRevision("/test/fence"), "=", 0)
	resp, err := f.cli.Txn(ctx).If(always).Then(clientv3.OpTxn(cmps, thenOps, elseOps)).Commit()
	if err != nil {
		return nil, err
	}
	if after {
		return nil, errInjectedAfter
	}
	inner := (*clientv3.TxnResponse)(resp.Responses[0].GetResponseTxn())
	inner.Header = resp.Header
	return inner, nil
}

func (f *fence) requests() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.n
}

// failFrom fails every request from the k+1-th on: before sending, or
// (after) the k+1-th once etcd applied it and every later one before.
func failFrom(k int, after bool) func(n int) (bool, bool) {
	return func(n int) (bool, bool) {
		switch {
		case n <= k:
			return false, false
		case n == k+1 && after:
			return false, true
		}
		return true, false
	}
}

// openStore opens a store at path replicated through r.
func openStore(t testing.TB, path string, r *Replica) *store.Store {
	t.Helper()
	s, err := store.Open(path, store.Options{Replicate: r.Commit})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// dump lists every bucket (with its sequence) and key of the bbolt file
// at path, one line each, in order; the file must be closed.
func dump(t testing.TB, path string) []string {
	t.Helper()
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{ReadOnly: true, Timeout: time.Second})
	require.NoError(t, err)
	defer db.Close()
	var out []string
	var walk func(name string, b *bbolt.Bucket)
	walk = func(name string, b *bbolt.Bucket) {
		out = append(out, fmt.Sprintf("bucket %s seq=%d", name, b.Sequence()))
		require.NoError(t, b.ForEach(func(k, v []byte) error {
			if v == nil {
				walk(name+"/"+strconv.Quote(string(k)), b.Bucket(k))
				return nil
			}
			sum := sha256.Sum256(v)
			out = append(out, fmt.Sprintf("key %s %q: %d bytes, sha256 %x", name, k, len(v), sum[:8]))
			return nil
		}))
	}
	require.NoError(t, db.View(func(tx *bbolt.Tx) error {
		return tx.ForEach(func(name []byte, b *bbolt.Bucket) error {
			walk(strconv.Quote(string(name)), b)
			return nil
		})
	}))
	return out
}

// etcdKeys returns every key and value under prefix.
func etcdKeys(t testing.TB, cli *clientv3.Client, prefix string) map[string]string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	resp, err := cli.Get(ctx, prefix, clientv3.WithPrefix())
	require.NoError(t, err)
	out := make(map[string]string, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		out[string(kv.Key)] = string(kv.Value)
	}
	return out
}

func testDaemonSet(name, image string) *schema.DaemonSet {
	return &schema.DaemonSet{
		TypeMeta: schema.TypeMeta{APIVersion: schema.APIVersionApps, Kind: schema.KindDaemonSet},
		Metadata: schema.ObjectMeta{Name: name},
		Spec: schema.DaemonSetSpec{
			Selector: &schema.LabelSelector{MatchLabels: map[string]string{"app": name}},
			Template: testTemplate(name, image),
		},
	}
}

func testTemplate(name, image string) schema.PodTemplateSpec {
	return schema.PodTemplateSpec{
		Metadata: schema.ObjectMeta{Labels: map[string]string{"app": name}},
		Spec:     schema.PodSpec{Containers: []schema.Container{{Name: name, Image: image}}},
	}
}

// desiredRecords returns the desired records of n nodes, each with two
// instances, the records of the store's own benchmarks.
func desiredRecords(n int, hash string) map[string]store.DesiredRecord {
	recs := make(map[string]store.DesiredRecord, n)
	for i := range n {
		recs[fmt.Sprintf("node-%06d", i)] = store.DesiredRecord{Instances: []schema.DesiredInstance{
			{DaemonSet: "default/a", Revision: hash + "0123456789abcdef0123"},
			{DaemonSet: "default/b", Revision: hash + "abcdef0123456789abcd"},
		}, PublishedAt: t0}
	}
	return recs
}

// writeFleet makes a store's worth of writes of every kind: daemonsets
// with revisions (nested buckets and their sequences), nodes, desired
// records, rollout parts (a replaced nested bucket), events past their
// bound, config objects, and the deletion of a daemonset whose name is
// a prefix of another's.
func writeFleet(t testing.TB, s *store.Store, nodes int) {
	t.Helper()
	for _, name := range []string{"a", "ab", "b"} {
		_, _, err := s.PutDaemonSet(testDaemonSet(name, "img:1"), t0)
		require.NoError(t, err)
		for _, img := range []string{"img:1", "img:2", "img:3"} {
			_, _, err = s.EnsureRevision("default/"+name, testTemplate(name, img), "", t0)
			require.NoError(t, err)
		}
	}
	_, err := s.PruneRevisions("default/b", 1, nil)
	require.NoError(t, err)
	recs := make([]store.NodeRecord, 0, nodes)
	for i := range nodes {
		recs = append(recs, store.NodeRecord{Name: fmt.Sprintf("node-%06d", i)})
	}
	require.NoError(t, s.PutNodes(recs))
	_, err = s.PutDesiredBatch(desiredRecords(nodes, "h1"))
	require.NoError(t, err)
	entries := []store.RolloutEntry{{Node: "node-000001", Value: "updating"}, {Node: "node-000002", Value: "done"}}
	require.NoError(t, s.PutRolloutParts("default/a", map[string]string{"target": "x"}, entries, false))
	require.NoError(t, s.PutRolloutParts("default/ab", map[string]string{"target": "y"}, entries, false))
	require.NoError(t, s.PutRolloutParts("default/a", map[string]string{"target": "z"}, entries[1:], true))
	for i := range 30 {
		_, err := s.AppendEvent(store.Event{Time: t0, Type: "Normal", Reason: fmt.Sprintf("R%d", i), Object: "node/n1"})
		require.NoError(t, err)
	}
	require.NoError(t, s.Update(false, func(tx *store.Txn) error {
		_, _, err := tx.PutConfigMap(schema.ConfigMap{TypeMeta: schema.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
			Metadata: schema.ObjectMeta{Name: "c"}, Data: map[string]string{"k": "v"}}, "api", t0)
		return err
	}))
	require.NoError(t, s.DeleteDaemonSet("default/a"))
	require.NoError(t, s.DeleteNode("node-000000"))
}

// newPath is a fresh store path in a directory of its own.
func newPath(t testing.TB) string { return filepath.Join(t.TempDir(), "edgeset.db") }

// startEtcd starts an embedded etcd and returns a client of it.
func startEtcd(t testing.TB) *clientv3.Client {
	t.Helper()
	return etcdtest.Start(t).Client(t)
}
