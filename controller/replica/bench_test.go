package replica

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/edgeset/edgeset/controller/store"
	"github.com/edgeset/edgeset/internal/etcdtest"
)

// desiredWriteSet records the write set of one PutDesiredBatch of n
// nodes (the records of the store's own benchmarks), and of what Open
// wrote before it.
func desiredWriteSet(b *testing.B, n int) (open, batch store.WriteSet) {
	var sets []store.WriteSet
	s, err := store.Open(newPath(b), store.Options{Replicate: func(_ context.Context, ws *store.WriteSet) error {
		sets = append(sets, cloneWriteSet(ws))
		return nil
	}})
	require.NoError(b, err)
	defer s.Close()
	_, err = s.PutDesiredBatch(desiredRecords(n, "h1"))
	require.NoError(b, err)
	require.Len(b, sets, 2)
	return sets[0], sets[1]
}

func writeSetBytes(ws *store.WriteSet) int64 {
	var n int64
	for _, op := range ws.Ops {
		n += int64(len(op.Key) + len(op.Value))
	}
	return n
}

// BenchmarkCommit commits write sets of 1 desired record (one fenced
// txn) and of 10,000 and 100,000 (staged) to an embedded etcd, through a
// fence that nests each txn as leader.Term does. MB/s counts the write
// set's keys and values.
func BenchmarkCommit(b *testing.B) {
	for _, n := range []int{1, 10000, 100000} {
		b.Run(fmt.Sprintf("records=%d", n), func(b *testing.B) {
			cli := etcdtest.Start(b).Client(b)
			open, ws := desiredWriteSet(b, n)
			f := &fence{cli: cli}
			r := New(cli, "", f, Options{})
			require.NoError(b, r.Commit(b.Context(), &open))
			b.SetBytes(writeSetBytes(&ws))
			start := f.requests()
			for b.Loop() {
				if err := r.Commit(b.Context(), &ws); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(f.requests()-start)/float64(b.N), "requests/op")
		})
	}
}

// BenchmarkRestore rebuilds the file of a 10,000-node store (nodes,
// desired records, daemonsets, events) from an embedded etcd. It also
// reports etcd's database size per node once compacted and defragmented.
func BenchmarkRestore(b *testing.B) {
	const nodes = 10000
	cli := etcdtest.Start(b).Client(b)
	r := New(cli, "", &fence{cli: cli}, Options{})
	s := openStore(b, newPath(b), r)
	writeFleet(b, s, nodes)
	require.NoError(b, s.Close())
	var size int64
	for _, kv := range etcdKeys(b, cli, DefaultPrefix+"/") {
		size += int64(len(kv))
	}
	dbSize := compactedSize(b, cli)
	b.SetBytes(size)
	path := newPath(b)
	for b.Loop() {
		if err := r.Restore(b.Context(), path); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(dbSize)/nodes, "etcd-bytes/node")
}

// compactedSize compacts etcd's history, defragments it and returns its
// database size.
func compactedSize(b *testing.B, cli *clientv3.Client) int64 {
	ctx := b.Context()
	ep := cli.Endpoints()[0]
	st, err := cli.Status(ctx, ep)
	require.NoError(b, err)
	_, err = cli.Compact(ctx, st.Header.Revision, clientv3.WithCompactPhysical())
	require.NoError(b, err)
	_, err = cli.Defragment(ctx, ep)
	require.NoError(b, err)
	st, err = cli.Status(ctx, ep)
	require.NoError(b, err)
	return st.DbSize
}
