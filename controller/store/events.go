package store

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"go.etcd.io/bbolt"
)

// Event is a notable occurrence kept for operators, stored in the events
// bucket under its 8-byte big-endian sequence number. The bucket holds at
// most Options.MaxEvents events; older ones are trimmed.
type Event struct {
	// Seq is assigned by the store: 1, 2, 3... never reused.
	Seq  uint64    `json:"seq"`
	Time time.Time `json:"time"`
	// Type is schema.EventNormal or schema.EventWarning.
	Type   string `json:"type"`
	Reason string `json:"reason"`
	// Object names what the event is about: "daemonset/namespace/name",
	// "node/name".
	Object  string `json:"object"`
	Message string `json:"message,omitempty"`
	// Count is how many occurrences the caller folded into this event;
	// zero means one.
	Count int32 `json:"count,omitempty"`
}

// EventFilter selects events for ListEvents. The zero value selects all.
type EventFilter struct {
	// Object, if set, must equal Event.Object.
	Object string
	// SinceSeq selects events with Seq above it.
	SinceSeq uint64
	// Limit, if positive, keeps only the newest Limit matching events.
	Limit int
}

// AppendEvent stores e (its Seq is ignored) and returns its sequence
// number. Concurrent calls are coalesced into one transaction (bbolt
// Batch), which adds up to 10 ms of latency to a lone caller; a goroutine
// with several events should use AppendEvents.
func (s *Store) AppendEvent(e Event) (seq uint64, err error) {
	err = s.batch(func(tx *bbolt.Tx) error {
		seqs, err := appendEvents(tx, s.maxEvents, []Event{e})
		if err == nil {
			seq = seqs[0]
		}
		return err
	})
	return seq, s.wrap(err, "append event %s %s", e.Object, e.Reason)
}

// AppendEvents stores events in one transaction, in order, and returns
// their sequence numbers.
func (s *Store) AppendEvents(events []Event) (seqs []uint64, err error) {
	err = s.update(func(tx *bbolt.Tx) (err error) {
		seqs, err = appendEvents(tx, s.maxEvents, events)
		return err
	})
	return seqs, s.wrap(err, "append %d events", len(events))
}

// appendEvents writes events under new sequence numbers, then trims the
// bucket to maxEvents.
func appendEvents(tx *bbolt.Tx, maxEvents int, events []Event) ([]uint64, error) {
	b, err := bucket(tx, bucketEvents)
	if err != nil {
		return nil, err
	}
	seqs := make([]uint64, 0, len(events))
	for _, e := range events {
		if e.Seq, err = b.NextSequence(); err != nil {
			return nil, err
		}
		if err := putJSONIn(b, bucketEvents, u64Key(e.Seq), e); err != nil {
			return nil, err
		}
		seqs = append(seqs, e.Seq)
	}
	return seqs, trimEvents(b, b.Sequence(), maxEvents)
}

// trimEvents deletes every event older than the newest maxEvents, given the
// newest sequence number. It visits only the deleted keys.
func trimEvents(b *bbolt.Bucket, newest uint64, maxEvents int) error {
	if newest <= uint64(maxEvents) {
		return nil
	}
	cutoff := newest - uint64(maxEvents) + 1
	var old [][]byte
	c := b.Cursor()
	for k, _ := c.First(); k != nil && binary.BigEndian.Uint64(k) < cutoff; k, _ = c.Next() {
		old = append(old, slices.Clone(k))
	}
	for _, k := range old {
		if err := b.Delete(k); err != nil {
			return fmt.Errorf("trim %s/%d: %w", bucketEvents, binary.BigEndian.Uint64(k), err)
		}
	}
	return nil
}

// ListEvents returns the events f selects, oldest first.
func (s *Store) ListEvents(f EventFilter) ([]Event, error) {
	var events []Event
	err := s.view(func(tx *bbolt.Tx) (err error) {
		events, err = listEvents(tx, f)
		return err
	})
	return events, s.wrap(err, "list events")
}

// listEvents walks back from the newest event, so a Limit or SinceSeq stops
// it early.
func listEvents(tx *bbolt.Tx, f EventFilter) ([]Event, error) {
	b, err := bucket(tx, bucketEvents)
	if err != nil {
		return nil, err
	}
	var events []Event
	c := b.Cursor()
	for k, v := c.Last(); k != nil && binary.BigEndian.Uint64(k) > f.SinceSeq; k, v = c.Prev() {
		if f.Limit > 0 && len(events) == f.Limit {
			break
		}
		var e Event
		if err := json.Unmarshal(v, &e); err != nil {
			return nil, fmt.Errorf("decode %s/%d: %w", bucketEvents, binary.BigEndian.Uint64(k), err)
		}
		if f.Object == "" || e.Object == f.Object {
			events = append(events, e)
		}
	}
	slices.Reverse(events)
	return events, nil
}
