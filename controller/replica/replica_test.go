package replica

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/edgeset/edgeset/controller/store"
	"github.com/edgeset/edgeset/schema"
)

// TestRoundTrip: a store written through Commit and rebuilt by Restore
// holds exactly what the original file holds, and store.Open accepts the
// rebuilt file, also in place of a stale cache.
func TestRoundTrip(t *testing.T) {
	cli := startEtcd(t)
	r := New(cli, "", &fence{cli: cli}, Options{})
	path := newPath(t)
	s := openStore(t, path, r)
	writeFleet(t, s, 300)
	require.NoError(t, s.Close())
	want := dump(t, path)

	restored := newPath(t)
	leftover := restored + ".restore-123"
	require.NoError(t, os.WriteFile(leftover, []byte("a restore killed mid-way"), 0o600))
	r2 := New(cli, "", &fence{cli: cli}, Options{})
	require.NoError(t, r2.Restore(t.Context(), restored))
	assert.Equal(t, want, dump(t, restored))
	assert.NoFileExists(t, leftover, "a killed restore's temporary file is removed")
	s2 := openStore(t, restored, r2)
	require.NoError(t, s2.Close())

	// The restored file, opened once (so with its marker), is now a
	// stale cache: the first store writes on. Restore replaces it, and
	// it opens.
	s = openStore(t, path, r)
	require.NoError(t, s.PutNode(store.NodeRecord{Name: "late"}))
	require.NoError(t, s.Close())
	_, err := os.Stat(store.MarkerPath(restored))
	require.NoError(t, err)
	require.NoError(t, New(cli, "", &fence{cli: cli}, Options{}).Restore(t.Context(), restored))
	assert.Equal(t, dump(t, path), dump(t, restored))
	s2 = openStore(t, restored, New(cli, "", &fence{cli: cli}, Options{}))
	_, err = s2.GetNode("late")
	require.NoError(t, err)
	assert.Empty(t, etcdKeys(t, cli, DefaultPrefix+"/txn/"), "no staging keys left")
}

// compactingKV compacts etcd's history after the first read of a paged
// scan, once, as etcd's auto-compaction might in the middle of a restore.
type compactingKV struct {
	clientv3.KV
	done bool
}

func (c *compactingKV) Get(ctx context.Context, key string, opts ...clientv3.OpOption) (*clientv3.GetResponse, error) {
	resp, err := c.KV.Get(ctx, key, opts...)
	if err == nil && !c.done && resp.More {
		c.done = true
		if _, err := c.KV.Put(ctx, "/unrelated", "x"); err != nil {
			return nil, err
		}
		st, err := c.KV.Get(ctx, "/unrelated")
		if err != nil {
			return nil, err
		}
		if _, err := c.KV.Compact(ctx, st.Header.Revision); err != nil {
			return nil, err
		}
	}
	return resp, err
}

// TestRestoreStartsAgainAfterCompaction: a restore whose revision etcd
// compacted between two pages reads again from a fresh revision.
func TestRestoreStartsAgainAfterCompaction(t *testing.T) {
	cli := startEtcd(t)
	r := New(cli, "", &fence{cli: cli}, Options{PageKeys: 50})
	path := newPath(t)
	s := openStore(t, path, r)
	writeFleet(t, s, 100)
	require.NoError(t, s.Close())
	ckv := &compactingKV{KV: cli}
	r.kv = ckv
	restored := newPath(t)
	require.NoError(t, r.Restore(t.Context(), restored))
	require.True(t, ckv.done, "etcd compacted mid-restore")
	assert.Equal(t, dump(t, path), dump(t, restored))
}

// TestRestoreEmptyPrefixOpens: an empty prefix restores to a file that
// store.Open initializes, and its migrations land in etcd.
func TestRestoreEmptyPrefixOpens(t *testing.T) {
	cli := startEtcd(t)
	r := New(cli, "/empty", &fence{cli: cli}, Options{})
	path := newPath(t)
	require.NoError(t, r.Restore(t.Context(), path))
	s := openStore(t, path, r)
	require.NoError(t, s.Close())
	keys := etcdKeys(t, cli, "/empty/d/")
	assert.Contains(t, keys, "/empty/d/b/meta/!")
	assert.Contains(t, keys, "/empty/d/b/meta/k/schemaVersion")
}

// TestBucketDeleteScopeAndSequences: deleting daemonset "a" deletes the
// subtree of its revision bucket and nothing of "ab"'s; sequences
// survive a round trip, so revision numbers go on where they were.
func TestBucketDeleteScopeAndSequences(t *testing.T) {
	cli := startEtcd(t)
	r := New(cli, "", &fence{cli: cli}, Options{})
	path := newPath(t)
	s := openStore(t, path, r)
	for _, name := range []string{"a", "ab"} {
		_, _, err := s.PutDaemonSet(testDaemonSet(name, "img:1"), t0)
		require.NoError(t, err)
		_, _, err = s.EnsureRevision("default/"+name, testTemplate(name, "img:2"), "", t0)
		require.NoError(t, err)
	}
	abDir := r.layout.dir([]string{"revisions", "default/ab"})
	before := etcdKeys(t, cli, abDir)
	require.Len(t, before, 3, "existence, sequence and the revision of ab: %v", before)
	require.NoError(t, s.DeleteDaemonSet("default/a"))
	assert.Empty(t, etcdKeys(t, cli, r.layout.dir([]string{"revisions", "default/a"})))
	assert.Equal(t, before, etcdKeys(t, cli, abDir), "ab's revisions untouched")
	require.NoError(t, s.Close())

	restored := newPath(t)
	r2 := New(cli, "", &fence{cli: cli}, Options{})
	require.NoError(t, r2.Restore(t.Context(), restored))
	assert.Equal(t, dump(t, path), dump(t, restored))
	s = openStore(t, restored, r2)
	rev, created, err := s.EnsureRevision("default/ab", testTemplate("ab", "img:3"), "", t0)
	require.NoError(t, err)
	require.True(t, created)
	assert.Equal(t, int64(2), rev.Number, "the revision sequence went on")
}

// TestSeed: a single-node store copied into an empty prefix restores to
// the same contents; a second Seed is refused.
func TestSeed(t *testing.T) {
	cli := startEtcd(t)
	path := newPath(t)
	s, err := store.Open(path, store.Options{})
	require.NoError(t, err)
	writeFleet(t, s, 2000)
	require.NoError(t, s.Close())

	f := &fence{cli: cli}
	require.NoError(t, Seed(t.Context(), cli, "/seeded", f, path))
	assert.Greater(t, f.requests(), 3, "a whole store is staged")
	restored := newPath(t)
	require.NoError(t, New(cli, "/seeded", &fence{cli: cli}, Options{}).Restore(t.Context(), restored))
	assert.Equal(t, dump(t, path), dump(t, restored))
	assert.Empty(t, etcdKeys(t, cli, "/seeded/txn/"))

	err = Seed(t.Context(), cli, "/seeded", &fence{cli: cli}, path)
	require.ErrorIs(t, err, ErrNotEmpty)

	held, err := store.Open(path, store.Options{})
	require.NoError(t, err)
	defer held.Close()
	err = Seed(t.Context(), cli, "/other", &fence{cli: cli}, path)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "stop the controller")
	assert.Empty(t, etcdKeys(t, cli, "/other/"))
}

// TestCommitTooLargeValueRefused: one value beyond a request's size
// fails its commit and the store keeps nothing of it.
func TestCommitTooLargeValueRefused(t *testing.T) {
	cli := startEtcd(t)
	r := New(cli, "", &fence{cli: cli}, Options{MaxRequestBytes: 64 << 10})
	s := openStore(t, newPath(t), r)
	big := store.DesiredRecord{Instances: nil}
	for range 2000 {
		big.ConfigMaps = append(big.ConfigMaps, schemaRef("a-long-config-map-name-of-some-length"))
	}
	_, err := s.PutDesired("n1", big)
	require.ErrorIs(t, err, errTooLarge)
	assert.Contains(t, err.Error(), "MaxRequestBytes")
	_, err = s.GetDesired("n1")
	require.ErrorIs(t, err, store.ErrNotFound)
	require.NoError(t, s.PutNode(store.NodeRecord{Name: "n1"}), "the replica still commits")
}

// TestCommitRefusedByEtcdIsKnown: a request etcd refuses as such (here
// larger than its --max-request-bytes, with the replica's limit set above
// it) wrote nothing: the store rolls it back and the replica goes on.
func TestCommitRefusedByEtcdIsKnown(t *testing.T) {
	cli := startEtcd(t)
	r := New(cli, "", &fence{cli: cli}, Options{MaxRequestBytes: 8 << 20})
	s := openStore(t, newPath(t), r)
	big := store.DesiredRecord{}
	for range 17000 { // about 1.7 MB: above the server's 1.5 MiB, below the client's 2 MiB
		big.ConfigMaps = append(big.ConfigMaps, schemaRef("a-long-config-map-name-of-some-length"))
	}
	_, err := s.PutDesired("n1", big)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "request is too large")
	assert.NotErrorIs(t, err, ErrDiverged)
	_, err = s.GetDesired("n1")
	require.ErrorIs(t, err, store.ErrNotFound)
	require.NoError(t, s.PutNode(store.NodeRecord{Name: "n1"}), "not ErrDiverged: the replica goes on")
}

// largeCase is a base store and one large transaction on top of it, as
// write sets, with the dumps of the file before and after it.
type largeCase struct {
	base   []store.WriteSet
	large  store.WriteSet
	before []string
	after  []string
}

// recordLarge writes a base store, then one transaction that replaces
// the desired records of 120 nodes, deletes a daemonset's revisions and
// replaces a rollout's entries, recording the write sets.
func recordLarge(t *testing.T) largeCase {
	var c largeCase
	var sets []store.WriteSet
	rec := func(_ context.Context, ws *store.WriteSet) error {
		sets = append(sets, cloneWriteSet(ws))
		return nil
	}
	path := newPath(t)
	s, err := store.Open(path, store.Options{Replicate: rec})
	require.NoError(t, err)
	writeFleet(t, s, 120)
	c.base = sets
	sets = nil
	backup := newPath(t)
	f, err := os.Create(backup)
	require.NoError(t, err)
	_, err = s.Backup(f, nil)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	c.before = dump(t, backup)
	require.NoError(t, s.Update(false, func(tx *store.Txn) error {
		if _, err := tx.PutDesiredBatch(desiredRecords(120, "h2")); err != nil {
			return err
		}
		if err := tx.DeleteDaemonSet("default/ab"); err != nil {
			return err
		}
		var entries []store.RolloutEntry
		for i := range 50 {
			entries = append(entries, store.RolloutEntry{Node: fmt.Sprintf("node-%06d", i), Value: "waiting"})
		}
		return tx.PutRolloutParts("default/b", map[string]string{"target": "w"}, entries, true)
	}))
	require.Len(t, sets, 1)
	c.large = sets[0]
	require.NoError(t, s.Close())
	c.after = dump(t, path)
	return c
}

// TestLargeCommitAtomicUnderCrashAtEveryRequest: a write set too large for
// one transaction, committed by a leader whose requests stop after the
// k-th (for every k, the k+1-th not sent, or sent with its response lost),
// leaves after the next term's Restore exactly the store before it or
// exactly the store after it: after it whenever Commit returned nil or
// the marker landed.
func TestLargeCommitAtomicUnderCrashAtEveryRequest(t *testing.T) {
	c := recordLarge(t)
	require.NotEqual(t, c.before, c.after)
	cli := startEtcd(t)
	opts := Options{MaxTxnOps: 16, MaxRequestBytes: 16 << 10}

	probe := &fence{cli: cli}
	commitAll(t, New(cli, "/probe", probe, opts), c.base)
	baseRequests := probe.requests()
	require.NoError(t, New(cli, "/probe", probe, opts).Commit(t.Context(), &c.large))
	total := probe.requests() - baseRequests
	require.Greater(t, total, 10, "the large write set is staged in many requests")
	t.Logf("the large write set takes %d requests", total)

	for k := 0; k < total; k++ {
		for _, lost := range []bool{false, true} {
			t.Run(fmt.Sprintf("k=%d/lost=%v", k, lost), func(t *testing.T) {
				prefix := fmt.Sprintf("/crash/%d/%v", k, lost)
				commitAll(t, New(cli, prefix, &fence{cli: cli}, opts), c.base)
				crashing := &fence{cli: cli, fail: failFrom(k, lost)}
				err := New(cli, prefix, crashing, opts).Commit(t.Context(), &c.large)

				path := newPath(t)
				require.NoError(t, New(cli, prefix, &fence{cli: cli}, opts).Restore(t.Context(), path))
				got := dump(t, path)
				switch {
				case err == nil:
					assert.Equal(t, c.after, got, "Commit returned nil: all of it")
				case !lost:
					assert.Equal(t, c.before, got, "Commit failed before sending its marker: none of it")
				default:
					if !assert.True(t, equal(got, c.before) || equal(got, c.after), "all or none") {
						t.Logf("err: %v", err)
					}
				}
				assert.Empty(t, etcdKeys(t, cli, prefix+"/txn/"), "Restore left no staging keys")
			})
		}
	}
}

// TestCommitAfterFailedCommitFinishesItFirst: a replica whose staged
// commit failed after its marker returns nil, and its next Commit finishes
// the staged one before its own, in order.
func TestCommitAfterFailedCommitFinishesItFirst(t *testing.T) {
	c := recordLarge(t)
	cli := startEtcd(t)
	opts := Options{MaxTxnOps: 16, MaxRequestBytes: 16 << 10}
	f := &fence{cli: cli}
	r := New(cli, "", f, opts)
	commitAll(t, r, c.base)
	// Fail the apply's first batch: the requests are the chunks, the
	// marker, then the batches.
	chunks := len(encodeChunks(mustReduce(t, r, &c.large), opts.MaxRequestBytes-len(r.layout.chunkKey("0123456789abcdef", 0))-opOverhead))
	start := f.requests()
	f.mu.Lock()
	f.fail = func(n int) (bool, bool) { return n == start+chunks+2, false }
	f.mu.Unlock()
	require.NoError(t, r.Commit(t.Context(), &c.large), "committed at its marker")
	assert.NotEmpty(t, etcdKeys(t, cli, DefaultPrefix+"/txn/"), "its apply is pending")

	next := &store.WriteSet{Ops: []store.Op{{Kind: store.OpPut, Bucket: []string{"nodes"}, Key: []byte("zz-later"), Value: []byte(`{"name":"zz-later"}`)}}}
	require.NoError(t, r.Commit(t.Context(), next))
	assert.Empty(t, etcdKeys(t, cli, DefaultPrefix+"/txn/"), "the pending apply was finished")
	path := newPath(t)
	require.NoError(t, New(cli, "", &fence{cli: cli}, opts).Restore(t.Context(), path))
	got := dump(t, path)
	assert.Len(t, got, len(c.after)+1)
	assert.Subset(t, got, c.after, "all of the large write set, then the next one")
}

// TestUnknownOutcomeDiverges: a commit whose response was lost leaves the
// replica refusing commits with ErrDiverged until Restore.
func TestUnknownOutcomeDiverges(t *testing.T) {
	cli := startEtcd(t)
	f := &fence{cli: cli}
	r := New(cli, "", f, Options{})
	path := newPath(t)
	s := openStore(t, path, r)
	f.mu.Lock()
	f.fail = func(n int) (bool, bool) { return false, n == 3 } // 1: Open's migrations, 2: n0, 3: n1
	f.mu.Unlock()
	_ = s.PutNode(store.NodeRecord{Name: "n0"}) // request 2
	err := s.PutNode(store.NodeRecord{Name: "n1"})
	require.ErrorIs(t, err, errInjectedAfter)
	require.ErrorIs(t, err, ErrDiverged, "the failing commit says so at once")
	err = s.PutNode(store.NodeRecord{Name: "n2"})
	require.ErrorIs(t, err, ErrDiverged)
	require.NoError(t, s.Close())

	require.NoError(t, r.Restore(t.Context(), path))
	s = openStore(t, path, r)
	_, err = s.GetNode("n1")
	require.NoError(t, err, "etcd took n1 though its response was lost: the rebuilt cache has it")
	require.NoError(t, s.PutNode(store.NodeRecord{Name: "n2"}))
}

func commitAll(t *testing.T, r *Replica, sets []store.WriteSet) {
	t.Helper()
	for i := range sets {
		require.NoError(t, r.Commit(t.Context(), &sets[i]))
	}
}

func mustReduce(t *testing.T, r *Replica, ws *store.WriteSet) []effect {
	t.Helper()
	e, err := reduce(r.layout, ws)
	require.NoError(t, err)
	return e
}

func equal(a, b []string) bool { return strings.Join(a, "\n") == strings.Join(b, "\n") }

func cloneWriteSet(ws *store.WriteSet) store.WriteSet {
	out := store.WriteSet{Ops: make([]store.Op, len(ws.Ops))}
	for i, op := range ws.Ops {
		op.Bucket = append([]string(nil), op.Bucket...)
		op.Key = append([]byte(nil), op.Key...)
		op.Value = append([]byte(nil), op.Value...)
		out.Ops[i] = op
	}
	return out
}

func schemaRef(name string) schema.ObjectRef {
	return schema.ObjectRef{Namespace: "default", Name: name, Hash: "0123456789abcdef0123"}
}
