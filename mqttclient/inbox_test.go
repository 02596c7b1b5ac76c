package mqttclient

import (
	"fmt"
	"slices"
	"testing"
)

type delivery struct{ topic, payload string }

// drain pops everything from in.
func drain(in *inbox) []delivery {
	var out []delivery
	for {
		topic, payload, ok := in.pop()
		if !ok {
			return out
		}
		out = append(out, delivery{topic, string(payload)})
	}
}

func TestInbox(t *testing.T) {
	type msg struct {
		topic, payload string
		event          bool
	}
	tests := []struct {
		name                string
		maxTopics, maxEvent int
		push                []msg
		want                []delivery
		coalesced, dropped  uint64
	}{
		{
			name:      "latest wins per topic, first-arrival order",
			maxTopics: 10, maxEvent: 10,
			push: []msg{{"a", "1", false}, {"b", "1", false}, {"a", "2", false}, {"a", "3", false}},
			want: []delivery{{"a", "3"}, {"b", "1"}}, coalesced: 2,
		},
		{
			name:      "events never coalesce",
			maxTopics: 10, maxEvent: 10,
			push: []msg{{"e", "1", true}, {"s", "1", false}, {"e", "2", true}, {"s", "2", false}},
			want: []delivery{{"e", "1"}, {"s", "2"}, {"e", "2"}}, coalesced: 1,
		},
		{
			name:      "full event buffer drops the newest",
			maxTopics: 10, maxEvent: 2,
			push: []msg{{"e", "1", true}, {"e", "2", true}, {"e", "3", true}},
			want: []delivery{{"e", "1"}, {"e", "2"}}, dropped: 1,
		},
		{
			name:      "topic bound drops new topics but still coalesces known ones",
			maxTopics: 1, maxEvent: 1,
			push: []msg{{"a", "1", false}, {"b", "1", false}, {"a", "2", false}},
			want: []delivery{{"a", "2"}}, coalesced: 1, dropped: 1,
		},
		{
			name:      "empty payload (cleared retained) is delivered",
			maxTopics: 10, maxEvent: 10,
			push: []msg{{"a", "1", false}, {"a", "", false}},
			want: []delivery{{"a", ""}}, coalesced: 1,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var st counters
			in := newInbox(tc.maxTopics, tc.maxEvent, &st)
			for _, m := range tc.push {
				in.push(m.topic, []byte(m.payload), m.event)
			}
			if got := drain(in); !slices.Equal(got, tc.want) {
				t.Errorf("delivered %v, want %v", got, tc.want)
			}
			if got := st.received.Load(); got != uint64(len(tc.push)) {
				t.Errorf("received = %d, want %d", got, len(tc.push))
			}
			if got := st.coalesced.Load(); got != tc.coalesced {
				t.Errorf("coalesced = %d, want %d", got, tc.coalesced)
			}
			if got := st.dropped.Load(); got != tc.dropped {
				t.Errorf("dropped = %d, want %d", got, tc.dropped)
			}
			if in.len() != 0 {
				t.Errorf("len after drain = %d", in.len())
			}
		})
	}
}

// TestInboxCompaction interleaves pushes and pops across many compactions
// and checks nothing is lost, duplicated or reordered.
func TestInboxCompaction(t *testing.T) {
	var st counters
	in := newInbox(1<<20, 1<<20, &st)
	var want, got []delivery
	next := 0
	for round := range 20 {
		for range 3000 {
			d := delivery{fmt.Sprintf("t%d", next), fmt.Sprint(round)}
			in.push(d.topic, []byte(d.payload), false)
			want = append(want, d)
			next++
		}
		for range 2000 + round*50 {
			topic, payload, ok := in.pop()
			if !ok {
				break
			}
			got = append(got, delivery{topic, string(payload)})
		}
	}
	got = append(got, drain(in)...)
	if !slices.Equal(got, want) {
		t.Fatalf("delivered %d items, want %d in order", len(got), len(want))
	}
	if in.head != 0 || len(in.items) != 0 || len(in.latest) != 0 {
		t.Errorf("inbox not empty after drain: head=%d items=%d latest=%d", in.head, len(in.items), len(in.latest))
	}
}

// TestInboxStaleKeepsPending: with a Stale rule, an older payload arriving
// while a newer one is pending does not replace it; a newer one does.
func TestInboxStaleKeepsPending(t *testing.T) {
	var stats counters
	in := newInbox(10, 10, &stats)
	in.stale = func(_ string, pending, incoming []byte) bool { return string(incoming) < string(pending) }
	in.push("t", []byte("3"), false)
	in.push("t", []byte("2"), false)
	in.push("t", []byte("1"), false)
	_, p, ok := in.pop()
	if !ok || string(p) != "3" {
		t.Fatalf("popped %q, want the newest pending payload 3", p)
	}
	in.push("t", []byte("4"), false)
	in.push("t", []byte("5"), false)
	if _, p, _ := in.pop(); string(p) != "5" {
		t.Fatalf("popped %q, want 5", p)
	}
}
