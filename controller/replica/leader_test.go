package replica

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/edgeset/edgeset/controller/leader"
	"github.com/edgeset/edgeset/controller/store"
)

// elect runs an Elector on cli and returns the terms it wins; the elector
// stops when the test ends.
func elect(t *testing.T, cli *clientv3.Client, id string) <-chan *leader.Term {
	t.Helper()
	terms := make(chan *leader.Term, 4)
	e, err := leader.New(leader.Options{
		Client: cli, Prefix: "/test/leader", ID: id, APIURL: "https://" + id + ".example", TTL: 2 * time.Second,
		Lead: func(ctx context.Context, term *leader.Term) error {
			terms <- term
			<-ctx.Done()
			return nil
		},
	})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := e.Run(ctx); err != nil {
			t.Errorf("elector %s: %v", id, err)
		}
	})
	t.Cleanup(func() { cancel(); wg.Wait() })
	return terms
}

// nextTerm waits for the elector's next term.
func nextTerm(t *testing.T, terms <-chan *leader.Term) *leader.Term {
	t.Helper()
	select {
	case term := <-terms:
		return term
	case <-time.After(10 * time.Second):
		t.Fatalf("no term within 10s")
		return nil
	}
}

// deposingFence is a real term that deletes its own leader key (as etcd
// does when the lease expires) after its first after requests.
type deposingFence struct {
	*leader.Term
	cli   *clientv3.Client
	mu    sync.Mutex
	n     int
	after int
}

func (f *deposingFence) Txn(ctx context.Context, cmps []clientv3.Cmp, thenOps, elseOps []clientv3.Op) (*clientv3.TxnResponse, error) {
	f.mu.Lock()
	f.n++
	if f.n == f.after+1 {
		if _, err := f.cli.Delete(ctx, f.Key); err != nil {
			f.mu.Unlock()
			return nil, err
		}
	}
	f.mu.Unlock()
	return f.Term.Txn(ctx, cmps, thenOps, elseOps)
}

// TestDeposedLeaderCommitRefused: with a real election, a leader whose
// term is lost (its key deleted, whether before a commit or in the middle
// of a staged one) gets leader.ErrNotLeader from the store's writes, and
// etcd's store keys do not change.
func TestDeposedLeaderCommitRefused(t *testing.T) {
	cli := startEtcd(t)
	terms := elect(t, cli, "c1")
	term := nextTerm(t, terms)
	opts := Options{MaxTxnOps: 16, MaxRequestBytes: 16 << 10}
	f := &deposingFence{Term: term, cli: cli, after: -1}
	r := New(cli, "", f, opts)
	s := openStore(t, newPath(t), r)
	writeFleet(t, s, 50)
	data := DefaultPrefix + "/d/"
	before := etcdKeys(t, cli, data)

	// Deposed in the middle of a staged commit: after 3 more requests.
	f.mu.Lock()
	f.after = f.n + 3
	f.mu.Unlock()
	_, err := s.PutDesiredBatch(desiredRecords(300, "h3"))
	require.ErrorIs(t, err, leader.ErrNotLeader)
	assert.Equal(t, before, etcdKeys(t, cli, data), "nothing of the staged commit landed")
	rec, err := s.GetDesired("node-000001")
	require.NoError(t, err)
	assert.Contains(t, rec.Instances[0].Revision, "h1", "the store rolled back")

	// And a small commit after the term is gone.
	err = s.PutNode(store.NodeRecord{Name: "late"})
	require.ErrorIs(t, err, leader.ErrNotLeader)
	_, err = s.GetNode("late")
	require.ErrorIs(t, err, store.ErrNotFound)
	assert.Equal(t, before, etcdKeys(t, cli, data), "nothing landed")

	// The next term's Restore removes the dead term's staging keys and
	// rebuilds the store as it was.
	require.NoError(t, s.Close())
	term2 := nextTerm(t, terms)
	require.Greater(t, term2.Rev, term.Rev)
	path := newPath(t)
	require.NoError(t, New(cli, "", term2, opts).Restore(t.Context(), path))
	assert.Empty(t, etcdKeys(t, cli, DefaultPrefix+"/txn/"))
	assert.Equal(t, before, etcdKeys(t, cli, data))
}

// TestStagedCommitThroughTerm: with a real term and the default limits,
// a staged commit of 5,000 desired records fits etcd's limits on nested
// transactions and restores whole; Restore logs its progress.
func TestStagedCommitThroughTerm(t *testing.T) {
	cli := startEtcd(t)
	term := nextTerm(t, elect(t, cli, "c1"))
	var logs logRecorder
	r := New(cli, "", term, Options{Log: slog.New(&logs)})
	path := newPath(t)
	s := openStore(t, path, r)
	_, err := s.PutDesiredBatch(desiredRecords(5000, "h1"))
	require.NoError(t, err)
	require.NoError(t, s.Close())
	restored := newPath(t)
	require.NoError(t, New(cli, "", term, Options{Log: slog.New(&logs)}).Restore(t.Context(), restored))
	assert.Equal(t, dump(t, path), dump(t, restored))
	assert.Contains(t, logs.messages(), "store restored from etcd")
}

// logRecorder is a slog.Handler that keeps the messages it is given.
type logRecorder struct {
	mu   sync.Mutex
	msgs []string
}

func (l *logRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (l *logRecorder) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.msgs = append(l.msgs, r.Message)
	return nil
}
func (l *logRecorder) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *logRecorder) WithGroup(string) slog.Handler      { return l }

func (l *logRecorder) messages() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.msgs...)
}
