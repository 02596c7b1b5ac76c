package store

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/edgeset/edgeset/schema"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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
	assert.Equal(t, uint64(1), trimmed)
	require.NoError(t, s.Close())
	s, err = Open(path, Options{MaxEvents: 4})
	require.NoError(t, err)
	defer s.Close()
	got, err = s.ListEvents(EventFilter{})
	require.NoError(t, err)
	assert.Equal(t, []uint64{12, 13, 14, 15}, seqsOf(got))
}
