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
	// LastTime is when the last occurrence folded into the event happened
	// (Kubernetes' lastTimestamp; Time is its firstTimestamp); zero for
	// an event of one occurrence.
	LastTime time.Time `json:"lastTime,omitzero"`
	// Source is the node whose report caused the event, empty for the
	// controller's own: the controller bounds what one node may store.
	Source string `json:"source,omitempty"`
}

// EventWrite is one transaction on the events bucket: Delete removes
// events by sequence number, Update replaces stored events (by Seq; one
// no longer stored is skipped), Append stores new ones as AppendEvents
// does, then the bucket is trimmed to MaxEvents.
type EventWrite struct {
	Delete []uint64
	Update []Event
	Append []Event
}

// WriteEvents applies w in one transaction and returns the sequence
// numbers of w.Append, in order, and the newest sequence number trimmed
// (every stored event up to it is gone; 0 if none was trimmed).
func (s *Store) WriteEvents(w EventWrite) (seqs []uint64, trimmed uint64, err error) {
	err = s.update(func(tx *bbolt.Tx) error {
		b, err := bucket(tx, bucketEvents)
		if err != nil {
			return err
		}
		if err := deleteEvents(tx, w.Delete); err != nil {
			return err
		}
		for _, e := range w.Update {
			if b.Get(u64Key(e.Seq)) == nil {
				continue
			}
			if err := putJSONIn(b, bucketEvents, u64Key(e.Seq), e); err != nil {
				return err
			}
		}
		seqs, trimmed, err = appendEvents(tx, s.maxEvents, w.Append)
		return err
	})
	return seqs, trimmed, s.wrap(err, "write events (%d deleted, %d updated, %d appended)", len(w.Delete), len(w.Update), len(w.Append))
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
		seqs, _, err := appendEvents(tx, s.maxEvents, []Event{e})
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
		seqs, _, err = appendEvents(tx, s.maxEvents, events)
		return err
	})
	return seqs, s.wrap(err, "append %d events", len(events))
}

// keyEventCount, in the meta bucket, holds how many events the events
// bucket holds (8 bytes big-endian), so trimming is by count: events
// deleted out of order (WriteEvents) leave no hole for older events to be
// trimmed early.
var keyEventCount = []byte("eventCount")

// appendEvents writes events under new sequence numbers, then trims the
// bucket to maxEvents; trimmed is the newest sequence number trimmed.
func appendEvents(tx *bbolt.Tx, maxEvents int, events []Event) (seqs []uint64, trimmed uint64, err error) {
	b, err := bucket(tx, bucketEvents)
	if err != nil {
		return nil, 0, err
	}
	n, err := eventCount(tx, b)
	if err != nil {
		return nil, 0, err
	}
	seqs = make([]uint64, 0, len(events))
	for _, e := range events {
		if e.Seq, err = b.NextSequence(); err != nil {
			return nil, 0, err
		}
		if err := putJSONIn(b, bucketEvents, u64Key(e.Seq), e); err != nil {
			return nil, 0, err
		}
		seqs = append(seqs, e.Seq)
	}
	n += uint64(len(events))
	if n, trimmed, err = trimEvents(b, n, maxEvents); err != nil {
		return nil, 0, err
	}
	return seqs, trimmed, setEventCount(tx, n)
}

// deleteEvents deletes the stored events of seqs.
func deleteEvents(tx *bbolt.Tx, seqs []uint64) error {
	b, err := bucket(tx, bucketEvents)
	if err != nil {
		return err
	}
	n, err := eventCount(tx, b)
	if err != nil {
		return err
	}
	for _, seq := range seqs {
		k := u64Key(seq)
		if b.Get(k) == nil {
			continue
		}
		if err := b.Delete(k); err != nil {
			return fmt.Errorf("delete %s/%d: %w", bucketEvents, seq, err)
		}
		n--
	}
	return setEventCount(tx, n)
}

// eventCount returns the number of stored events, counting them once in a
// store written before the count was kept.
func eventCount(tx *bbolt.Tx, events *bbolt.Bucket) (uint64, error) {
	meta, err := bucket(tx, bucketMeta)
	if err != nil {
		return 0, err
	}
	if v := meta.Get(keyEventCount); len(v) == 8 {
		return binary.BigEndian.Uint64(v), nil
	}
	var n uint64
	err = events.ForEach(func(_, _ []byte) error { n++; return nil })
	return n, err
}

func setEventCount(tx *bbolt.Tx, n uint64) error {
	meta, err := bucket(tx, bucketMeta)
	if err != nil {
		return err
	}
	return meta.Put(keyEventCount, u64Key(n))
}

// trimEvents deletes the oldest events while more than maxEvents of the n
// stored remain, and returns the count left and the newest sequence
// number deleted (0 if none). It visits only the deleted keys.
func trimEvents(b *bbolt.Bucket, n uint64, maxEvents int) (left, trimmed uint64, err error) {
	if n <= uint64(maxEvents) {
		return n, 0, nil
	}
	var old [][]byte
	c := b.Cursor()
	for k, _ := c.First(); k != nil && n-uint64(len(old)) > uint64(maxEvents); k, _ = c.Next() {
		old = append(old, slices.Clone(k))
	}
	for _, k := range old {
		if err := b.Delete(k); err != nil {
			return 0, 0, fmt.Errorf("trim %s/%d: %w", bucketEvents, binary.BigEndian.Uint64(k), err)
		}
	}
	if len(old) > 0 {
		trimmed = binary.BigEndian.Uint64(old[len(old)-1])
	}
	return n - uint64(len(old)), trimmed, nil
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
