package store

import (
	"fmt"
	"os"
	"testing"

	"github.com/stretchr/testify/require"
)

// BenchmarkPutDesiredBatch10k stores the desired state of 10,000 nodes in
// one transaction, as a reconcile pass over a whole fleet does.
func BenchmarkPutDesiredBatch10k(b *testing.B) {
	s, _ := openTemp(b, Options{})
	recs := make(map[string]DesiredRecord, 10000)
	for i := range 10000 {
		recs[fmt.Sprintf("node-%05d", i)] = DesiredRecord{Instances: append(testInstances("0123456789abcdef0123"),
			testInstances("abcdef0123456789abcd")...)}
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.PutDesiredBatch(recs); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/10000, "ns/node")
}

// BenchmarkAppendEvent appends from parallel goroutines, which bbolt's
// Batch coalesces into shared fsyncs; the bound is reached and trimmed.
func BenchmarkAppendEvent(b *testing.B) {
	s, _ := openTemp(b, Options{MaxEvents: 1000})
	e := testEvent("node/n1", "BackOff")
	b.ReportAllocs()
	b.SetParallelism(16)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := s.AppendEvent(e); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkAppendEvents100 appends 100 events per transaction from one
// goroutine.
func BenchmarkAppendEvents100(b *testing.B) {
	s, _ := openTemp(b, Options{MaxEvents: 1000})
	events := make([]Event, 100)
	for i := range events {
		events[i] = testEvent("node/n1", "BackOff")
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.AppendEvents(events); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkOpenLargeStore opens (and so checks every page of, see
// boltfile.Check) stores holding the desired state of 10,000 and 50,000
// nodes; it reports the file's size.
func BenchmarkOpenLargeStore(b *testing.B) {
	for _, nodes := range []int{10000, 50000} {
		b.Run(fmt.Sprintf("nodes=%d", nodes), func(b *testing.B) {
			s, path := openTemp(b, Options{})
			recs := make(map[string]DesiredRecord, nodes)
			for i := range nodes {
				recs[fmt.Sprintf("node-%05d", i)] = DesiredRecord{Instances: append(testInstances("0123456789abcdef0123"),
					testInstances("abcdef0123456789abcd")...)}
			}
			if _, err := s.PutDesiredBatch(recs); err != nil {
				b.Fatal(err)
			}
			require.NoError(b, s.Close())
			fi, err := os.Stat(path)
			require.NoError(b, err)
			for b.Loop() {
				s, err := Open(path, Options{})
				if err != nil {
					b.Fatal(err)
				}
				if err := s.Close(); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(fi.Size())/(1<<20), "MiB")
		})
	}
}
