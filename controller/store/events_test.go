package store

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/edgeset/edgeset/schema"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.etcd.io/bbolt"
)

func testEvent(object, reason string) Event {
	return Event{Time: t0, Type: schema.EventNormal, Reason: reason, Object: object, Message: reason + " " + object}
}

func seqsOf(events []Event) []uint64 {
	var seqs []uint64
	for _, e := range events {
		seqs = append(seqs, e.Seq)
	}
	return seqs
}

func TestListEvents(t *testing.T) {
	s, _ := openTemp(t, Options{})
	// Seqs 1..10; odd ones about node/n1, even ones about daemonset/default/a.
	for i := 1; i <= 10; i++ {
		object := "daemonset/default/a"
		if i%2 == 1 {
			object = "node/n1"
		}
		seq, err := s.AppendEvent(testEvent(object, fmt.Sprint("r", i)))
		require.NoError(t, err)
		require.Equal(t, uint64(i), seq)
	}
	cases := []struct {
		name   string
		filter EventFilter
		want   []uint64
	}{
		{"all", EventFilter{}, []uint64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}},
		{"object", EventFilter{Object: "node/n1"}, []uint64{1, 3, 5, 7, 9}},
		{"unknown object", EventFilter{Object: "node/n9"}, nil},
		{"since", EventFilter{SinceSeq: 7}, []uint64{8, 9, 10}},
		{"since newest", EventFilter{SinceSeq: 10}, nil},
		{"limit keeps newest", EventFilter{Limit: 3}, []uint64{8, 9, 10}},
		{"object and limit", EventFilter{Object: "daemonset/default/a", Limit: 2}, []uint64{8, 10}},
		{"object since limit", EventFilter{Object: "node/n1", SinceSeq: 2, Limit: 10}, []uint64{3, 5, 7, 9}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := s.ListEvents(tc.filter)
			require.NoError(t, err)
			assert.Equal(t, tc.want, seqsOf(got))
		})
	}
	got, err := s.ListEvents(EventFilter{SinceSeq: 9})
	require.NoError(t, err)
	require.Len(t, got, 1)
	assert.Equal(t, testEvent("daemonset/default/a", "r10"), func() Event { e := got[0]; e.Seq = 0; return e }())
}

func TestEventsBounded(t *testing.T) {
	s, path := openTemp(t, Options{MaxEvents: 5})
	seqs, err := s.AppendEvents([]Event{testEvent("node/n1", "a"), testEvent("node/n1", "b"), testEvent("node/n1", "c")})
	require.NoError(t, err)
	assert.Equal(t, []uint64{1, 2, 3}, seqs)
	for range 9 {
		_, err := s.AppendEvent(testEvent("node/n1", "x"))
		require.NoError(t, err)
	}
	got, err := s.ListEvents(EventFilter{})
	require.NoError(t, err)
	assert.Equal(t, []uint64{8, 9, 10, 11, 12}, seqsOf(got))

	// A batch larger than the bound keeps its newest events.
	var burst []Event
	for range 7 {
		burst = append(burst, testEvent("node/n2", "burst"))
	}
	_, err = s.AppendEvents(burst)
	require.NoError(t, err)
	got, err = s.ListEvents(EventFilter{})
	require.NoError(t, err)
	assert.Equal(t, []uint64{15, 16, 17, 18, 19}, seqsOf(got))

	// Reopening with a smaller bound trims on the next append; sequence
	// numbers continue.
	require.NoError(t, s.Close())
	s, err = Open(path, Options{MaxEvents: 2})
	require.NoError(t, err)
	defer s.Close()
	seq, err := s.AppendEvent(testEvent("node/n1", "after"))
	require.NoError(t, err)
	assert.Equal(t, uint64(20), seq)
	got, err = s.ListEvents(EventFilter{})
	require.NoError(t, err)
	assert.Equal(t, []uint64{19, 20}, seqsOf(got))
}

func TestAppendEventConcurrent(t *testing.T) {
	s, _ := openTemp(t, Options{MaxEvents: 1000})
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		seen = map[uint64]bool{}
	)
	for i := range 40 {
		wg.Go(func() {
			seq, err := s.AppendEvent(testEvent(fmt.Sprintf("node/n%d", i), "x"))
			assert.NoError(t, err)
			mu.Lock()
			seen[seq] = true
			mu.Unlock()
		})
	}
	wg.Wait()
	assert.Len(t, seen, 40, "sequence numbers unique")
	got, err := s.ListEvents(EventFilter{})
	require.NoError(t, err)
	assert.Len(t, got, 40)
	for _, e := range got {
		assert.True(t, seen[e.Seq])
		assert.True(t, e.Time.Equal(t0))
	}
}

// TestWriteEventsTrimsByCount: events deleted out of order (a node's
// oldest, evicted by its cap) free their places; an older event of
// someone else is trimmed only once MaxEvents events are stored again.
func TestWriteEventsTrimsByCount(t *testing.T) {
	s, path := openTemp(t, Options{MaxEvents: 4})
	seqs, err := s.AppendEvents([]Event{testEvent("daemonset/default/a", "Applied"), testEvent("node/n1", "x"), testEvent("node/n1", "y")})
	require.NoError(t, err)
	require.Equal(t, []uint64{1, 2, 3}, seqs)
	for i := range 10 {
		// The node is capped at its two newest: each new one evicts its
		// oldest, and Applied (seq 1) stays.
		e := testEvent("node/n1", fmt.Sprint("z", i))
		seqs, trimmed, err := s.WriteEvents(EventWrite{Delete: []uint64{uint64(2 + i)}, Append: []Event{e}})
		require.NoError(t, err)
		assert.Equal(t, []uint64{uint64(4 + i)}, seqs)
		assert.Zero(t, trimmed)
	}
	got, err := s.ListEvents(EventFilter{})
	require.NoError(t, err)
	assert.Equal(t, []uint64{1, 12, 13}, seqsOf(got))

	// An update replaces a stored event; one no longer stored is skipped.
	up := got[0]
	up.Count, up.LastTime = 3, t0.Add(time.Minute)
	_, _, err = s.WriteEvents(EventWrite{Update: []Event{up, {Seq: 2, Reason: "gone"}}})
	require.NoError(t, err)
	got, err = s.ListEvents(EventFilter{})
	require.NoError(t, err)
	assert.Equal(t, []uint64{1, 12, 13}, seqsOf(got))
	assert.Equal(t, int32(3), got[0].Count)
	assert.True(t, got[0].LastTime.Equal(t0.Add(time.Minute)))

	// Filling up trims the oldest by count; the count survives a reopen.
	_, trimmed, err := s.WriteEvents(EventWrite{Append: []Event{testEvent("node/n2", "a"), testEvent("node/n2", "b")}})
	require.NoError(t, err)
	assert.Equal(t, Trimmed{Own: 1}, trimmed)
	require.NoError(t, s.Close())
	s, err = Open(path, Options{MaxEvents: 4})
	require.NoError(t, err)
	defer s.Close()
	got, err = s.ListEvents(EventFilter{})
	require.NoError(t, err)
	assert.Equal(t, []uint64{12, 13, 14, 15}, seqsOf(got))
}

// nodeEvent is an event caused by a report of node.
func nodeEvent(node, reason string) Event {
	e := testEvent("node/"+node, reason)
	e.Source = node
	return e
}

// TestEventPools: node-caused events hold at most MaxNodeEvents places,
// their oldest trimmed first whoever caused it; the controller's own
// events are trimmed only among themselves, and give back the places of
// the node pool they used, oldest first, as node-caused events arrive.
func TestEventPools(t *testing.T) {
	own, node := testEvent("daemonset/default/a", "Applied"), nodeEvent("n1", "Failed")
	n := func(k int, e Event) []Event { return slices.Repeat([]Event{e}, k) }
	cases := []struct {
		name             string
		maxEvents, nodes int
		batches          [][]Event
		want             []uint64 // stored seqs
		trimmed          Trimmed  // of the last batch
	}{
		{"node events trim node events", 6, 3, [][]Event{n(2, own), n(4, node), n(1, node)}, []uint64{1, 2, 5, 6, 7}, Trimmed{Node: 4}},
		{"a flood keeps the controller's events", 6, 3, [][]Event{n(2, own), n(100, node)}, []uint64{1, 2, 100, 101, 102}, Trimmed{Node: 99}},
		{"own events trim own events", 4, 2, [][]Event{n(2, node), n(3, own)}, []uint64{1, 2, 4, 5}, Trimmed{Own: 3}},
		{"own events use the node pool's free places", 4, 2, [][]Event{n(4, own)}, []uint64{1, 2, 3, 4}, Trimmed{}},
		{"and give them back", 4, 2, [][]Event{n(4, own), n(1, node)}, []uint64{2, 3, 4, 5}, Trimmed{Own: 1}},
		{"down to their own share", 4, 2, [][]Event{n(4, own), n(3, node)}, []uint64{3, 4, 6, 7}, Trimmed{Own: 2, Node: 5}},
		{"one batch trims both pools", 4, 2, [][]Event{{own, node, own, node, node, own, own}}, []uint64{4, 5, 6, 7}, Trimmed{Own: 3, Node: 2}},
		{"a node share of all", 3, 3, [][]Event{n(1, own), n(3, node)}, []uint64{2, 3, 4}, Trimmed{Own: 1}},
		{"default share is half", 4, 0, [][]Event{n(1, own), n(5, node)}, []uint64{1, 5, 6}, Trimmed{Node: 4}},
		{"a share above all is all", 2, 9, [][]Event{n(3, node)}, []uint64{2, 3}, Trimmed{Node: 1}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, _ := openTemp(t, Options{MaxEvents: tc.maxEvents, MaxNodeEvents: tc.nodes})
			var trimmed Trimmed
			for _, batch := range tc.batches {
				var err error
				_, trimmed, err = s.WriteEvents(EventWrite{Append: batch})
				require.NoError(t, err)
			}
			got, err := s.ListEvents(EventFilter{})
			require.NoError(t, err)
			assert.Equal(t, tc.want, seqsOf(got))
			assert.Equal(t, tc.trimmed, trimmed)
		})
	}
}

// TestEventPoolsDeleteAndUpdate: an event deleted by sequence number (a
// node's cap) frees a place in its own pool only, and an update that
// moves an event to the other pool is counted there.
func TestEventPoolsDeleteAndUpdate(t *testing.T) {
	s, _ := openTemp(t, Options{MaxEvents: 4, MaxNodeEvents: 2})
	_, err := s.AppendEvents([]Event{nodeEvent("n1", "a"), nodeEvent("n1", "b"), testEvent("daemonset/default/a", "Applied")})
	require.NoError(t, err)
	// Deleting node event 1 lets a new one in without trimming node event 2.
	_, trimmed, err := s.WriteEvents(EventWrite{Delete: []uint64{1}, Append: []Event{nodeEvent("n2", "c")}})
	require.NoError(t, err)
	assert.Zero(t, trimmed)
	// Event 3 becomes node-caused: three node events, the oldest trimmed.
	moved := testEvent("daemonset/default/a", "Applied")
	moved.Seq, moved.Source = 3, "n3"
	_, trimmed, err = s.WriteEvents(EventWrite{Update: []Event{moved}})
	require.NoError(t, err)
	assert.Equal(t, Trimmed{Node: 2}, trimmed)
	got, err := s.ListEvents(EventFilter{})
	require.NoError(t, err)
	assert.Equal(t, []uint64{3, 4}, seqsOf(got))
}

// TestEventPoolsCountedOnFirstWrite: a store written before the pools were
// counted (no counters in the meta bucket) needs no migration: the first
// write counts them, and the controller's events are kept from then on.
func TestEventPoolsCountedOnFirstWrite(t *testing.T) {
	s, path := openTemp(t, Options{MaxEvents: 6})
	var old []Event
	for i := range 6 {
		if i%3 == 0 {
			old = append(old, testEvent("daemonset/default/a", fmt.Sprint("Applied", i)))
		} else {
			old = append(old, nodeEvent("n1", fmt.Sprint("x", i)))
		}
	}
	_, err := s.AppendEvents(old) // seqs 1..6: own 1 and 4, node the rest
	require.NoError(t, err)
	require.NoError(t, s.db.Update(func(tx *bbolt.Tx) error {
		meta := tx.Bucket(bucketMeta)
		for _, k := range [][]byte{keyEventCount, keyNodeEventCount, keyOwnEventFloor, keyNodeEventFloor} {
			if err := meta.Delete(k); err != nil {
				return err
			}
		}
		return nil
	}))
	require.NoError(t, s.Close())

	s, err = Open(path, Options{MaxEvents: 6})
	require.NoError(t, err)
	defer s.Close()
	for i := range 5 {
		_, err := s.AppendEvent(nodeEvent("n2", fmt.Sprint("y", i)))
		require.NoError(t, err)
	}
	got, err := s.ListEvents(EventFilter{})
	require.NoError(t, err)
	assert.Equal(t, []uint64{1, 4, 9, 10, 11}, seqsOf(got), "the controller's events 1 and 4 kept; the node pool holds its newest 3")
}
