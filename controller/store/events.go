package store

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"slices"
	"time"
)

// Event is a notable occurrence kept for operators, stored in the events
// bucket under its 8-byte big-endian sequence number. The bucket holds at
// most Options.MaxEvents events, at most Options.MaxNodeEvents of them
// caused by nodes; older ones are trimmed (see Trimmed).
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
// does, then the pools are trimmed (see Trimmed).
type EventWrite struct {
	Delete []uint64
	Update []Event
	Append []Event
}

// Trimmed is what a write trimmed, per pool: every stored event of the
// pool up to the sequence number is gone (0: none was trimmed).
//
// Events are kept in two pools. Node-caused events (Source != "") hold at
// most Options.MaxNodeEvents places together: past it the oldest
// node-caused event is trimmed, whoever caused it. The controller's own
// events (Source == "") hold the rest of Options.MaxEvents, and are
// trimmed only among themselves: no number of nodes can trim them below
// MaxEvents-MaxNodeEvents. While the node pool is below its share, the
// controller's events may use the places it leaves, and give them back
// (oldest first) as node-caused events arrive.
type Trimmed struct {
	Own, Node uint64
}

// WriteEvents applies w in one transaction and returns the sequence
// numbers of w.Append, in order, and what was trimmed.
func (s *Store) WriteEvents(w EventWrite) (seqs []uint64, trimmed Trimmed, err error) {
	err = s.update(func(tx *boltTx) (err error) {
		seqs, trimmed, err = writeEvents(tx, s.eventLimits(), w)
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
	err = s.batch(func(tx *boltTx) error {
		seqs, _, err := writeEvents(tx, s.eventLimits(), EventWrite{Append: []Event{e}})
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
	err = s.update(func(tx *boltTx) (err error) {
		seqs, _, err = writeEvents(tx, s.eventLimits(), EventWrite{Append: events})
		return err
	})
	return seqs, s.wrap(err, "append %d events", len(events))
}

// eventLimits bound the events bucket: max events in all, at most maxNode
// of them node-caused (0 < maxNode <= max).
type eventLimits struct {
	max, maxNode uint64
}

func (s *Store) eventLimits() eventLimits {
	l := eventLimits{max: uint64(max(1, s.maxEvents))}
	l.maxNode = min(l.max, uint64(max(1, s.maxNodeEvents)))
	return l
}

// Keys in the meta bucket that keep the events bucket's pools, each 8
// bytes big-endian, so trimming is by count: events deleted out of order
// (a node's cap) leave no hole for older events to be trimmed early.
// A store written before a key was kept is counted once, in the first
// write's transaction (no migration).
var (
	// keyEventCount is how many events are stored.
	keyEventCount = []byte("eventCount")
	// keyNodeEventCount is how many of them are node-caused.
	keyNodeEventCount = []byte("nodeEventCount")
	// keyOwnEventFloor and keyNodeEventFloor are lower bounds of the
	// sequence numbers of each pool, where trimming starts looking: the
	// controller's own old events are not walked over on every trim of
	// the node pool, nor the reverse. Any lower bound is correct.
	keyOwnEventFloor  = []byte("ownEventFloor")
	keyNodeEventFloor = []byte("nodeEventFloor")
)

// eventPools is what the meta bucket keeps of the events bucket.
type eventPools struct {
	total, node uint64
	// floor is the lower bound of each pool's sequence numbers, by
	// nodeCaused (false: the controller's own).
	floor [2]uint64
}

// add changes the count of the pool of nodeCaused events by d.
func (p *eventPools) add(nodeCaused bool, d int) {
	p.total += uint64(d)
	if nodeCaused {
		p.node += uint64(d)
	}
}

// writeEvents applies w in tx: deletes, updates, appends under new
// sequence numbers, then trims each pool to its limit.
func writeEvents(tx *boltTx, l eventLimits, w EventWrite) (seqs []uint64, trimmed Trimmed, err error) {
	b, err := bucket(tx, bucketEvents)
	if err != nil {
		return nil, Trimmed{}, err
	}
	p, err := readEventPools(tx, b)
	if err != nil {
		return nil, Trimmed{}, err
	}
	if err := deleteEvents(b, &p, w.Delete); err != nil {
		return nil, Trimmed{}, err
	}
	if err := updateEvents(b, &p, w.Update); err != nil {
		return nil, Trimmed{}, err
	}
	seqs = make([]uint64, 0, len(w.Append))
	for _, e := range w.Append {
		if e.Seq, err = b.NextSequence(); err != nil {
			return nil, Trimmed{}, err
		}
		if err := putJSONIn(b, bucketEvents, u64Key(e.Seq), e); err != nil {
			return nil, Trimmed{}, err
		}
		p.add(e.Source != "", 1)
		seqs = append(seqs, e.Seq)
	}
	if trimmed, err = trimEvents(b, &p, l); err != nil {
		return nil, Trimmed{}, err
	}
	return seqs, trimmed, writeEventPools(tx, p)
}

// deleteEvents deletes the stored events of seqs.
func deleteEvents(b *boltBucket, p *eventPools, seqs []uint64) error {
	for _, seq := range seqs {
		k := u64Key(seq)
		v := b.Get(k)
		if v == nil {
			continue
		}
		nodeCaused, err := isNodeCaused(seq, v)
		if err != nil {
			return err
		}
		if err := b.Delete(k); err != nil {
			return fmt.Errorf("delete %s/%d: %w", bucketEvents, seq, err)
		}
		p.add(nodeCaused, -1)
	}
	return nil
}

// updateEvents replaces the stored events of events; one no longer stored
// is skipped. An update that changes an event's Source moves it between
// the pools.
func updateEvents(b *boltBucket, p *eventPools, events []Event) error {
	for _, e := range events {
		v := b.Get(u64Key(e.Seq))
		if v == nil {
			continue
		}
		was, err := isNodeCaused(e.Seq, v)
		if err != nil {
			return err
		}
		if err := putJSONIn(b, bucketEvents, u64Key(e.Seq), e); err != nil {
			return err
		}
		p.add(was, -1)
		p.add(e.Source != "", 1)
	}
	return nil
}

// isNodeCaused reports whether the stored event v (under seq) was caused
// by a node.
func isNodeCaused(seq uint64, v []byte) (bool, error) {
	var e struct {
		Source string `json:"source"`
	}
	if err := json.Unmarshal(v, &e); err != nil {
		return false, fmt.Errorf("decode %s/%d: %w", bucketEvents, seq, err)
	}
	return e.Source != "", nil
}

// readEventPools returns what the meta bucket keeps of the events bucket,
// counting the events once if a count is missing (a store written before
// it was kept) or impossible (more node-caused events than events).
func readEventPools(tx *boltTx, events *boltBucket) (eventPools, error) {
	meta, err := bucket(tx, bucketMeta)
	if err != nil {
		return eventPools{}, err
	}
	var p eventPools
	total, okTotal := metaU64(meta, keyEventCount)
	node, okNode := metaU64(meta, keyNodeEventCount)
	p.floor[0], _ = metaU64(meta, keyOwnEventFloor)
	p.floor[1], _ = metaU64(meta, keyNodeEventFloor)
	if okTotal && okNode && node <= total {
		p.total, p.node = total, node
		return p, nil
	}
	p.total, p.node, err = countEventPools(events)
	return p, err
}

// countEventPools counts the stored events, and the node-caused ones.
func countEventPools(events *boltBucket) (total, node uint64, err error) {
	err = events.ForEach(func(k, v []byte) error {
		nodeCaused, err := isNodeCaused(binary.BigEndian.Uint64(k), v)
		total++
		if nodeCaused {
			node++
		}
		return err
	})
	return total, node, err
}

func writeEventPools(tx *boltTx, p eventPools) error {
	meta, err := bucket(tx, bucketMeta)
	if err != nil {
		return err
	}
	for _, kv := range []struct {
		key []byte
		v   uint64
	}{{keyEventCount, p.total}, {keyNodeEventCount, p.node}, {keyOwnEventFloor, p.floor[0]}, {keyNodeEventFloor, p.floor[1]}} {
		if err := meta.Put(kv.key, u64Key(kv.v)); err != nil {
			return fmt.Errorf("write %s/%s: %w", bucketMeta, kv.key, err)
		}
	}
	return nil
}

// metaU64 reads the 8-byte counter under key; ok is false if there is none.
func metaU64(meta *boltBucket, key []byte) (v uint64, ok bool) {
	if b := meta.Get(key); len(b) == 8 {
		return binary.BigEndian.Uint64(b), true
	}
	return 0, false
}

// trimEvents trims the oldest node-caused events while more than
// l.maxNode are stored, then the controller's oldest own events while more
// than l.max events are stored in all (l.maxNode <= l.max, so there are
// enough of them).
func trimEvents(b *boltBucket, p *eventPools, l eventLimits) (trimmed Trimmed, err error) {
	if p.node > l.maxNode {
		if trimmed.Node, err = trimPool(b, p, true, p.node-l.maxNode); err != nil {
			return Trimmed{}, err
		}
	}
	if p.total > l.max {
		if trimmed.Own, err = trimPool(b, p, false, p.total-l.max); err != nil {
			return Trimmed{}, err
		}
	}
	return trimmed, nil
}

// trimPool deletes the n oldest events of the pool of nodeCaused events
// and returns the newest sequence number deleted. It walks from the
// pool's floor, and moves the floor past what it deleted. If the pool
// holds fewer than n events (a count gone wrong), it deletes them all and
// counts the bucket anew.
func trimPool(b *boltBucket, p *eventPools, nodeCaused bool, n uint64) (trimmed uint64, err error) {
	pool := 0
	if nodeCaused {
		pool = 1
	}
	var old [][]byte
	c := b.Cursor()
	for k, v := c.Seek(u64Key(p.floor[pool])); k != nil && uint64(len(old)) < n; k, v = c.Next() {
		in, err := isNodeCaused(binary.BigEndian.Uint64(k), v)
		if err != nil {
			return 0, err
		}
		if in == nodeCaused {
			old = append(old, slices.Clone(k))
		}
	}
	for _, k := range old {
		if err := b.Delete(k); err != nil {
			return 0, fmt.Errorf("trim %s/%d: %w", bucketEvents, binary.BigEndian.Uint64(k), err)
		}
	}
	if len(old) > 0 {
		trimmed = binary.BigEndian.Uint64(old[len(old)-1])
		p.floor[pool] = trimmed + 1
	}
	if uint64(len(old)) < n {
		p.total, p.node, err = countEventPools(b)
		return trimmed, err
	}
	p.add(nodeCaused, -len(old))
	return trimmed, nil
}

// ListEvents returns the events f selects, oldest first.
func (s *Store) ListEvents(f EventFilter) ([]Event, error) {
	var events []Event
	err := s.view(func(tx *boltTx) (err error) {
		events, err = listEvents(tx, f)
		return err
	})
	return events, s.wrap(err, "list events")
}

// listEvents walks back from the newest event, so a Limit or SinceSeq stops
// it early.
func listEvents(tx *boltTx, f EventFilter) ([]Event, error) {
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
