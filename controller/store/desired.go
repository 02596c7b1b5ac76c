package store

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/edgeset/edgeset/internal/fanout"
	"github.com/edgeset/edgeset/schema"
)

// DesiredRecord is what the controller last published (or is about to
// publish) to a node, stored in the desired bucket under the node name. A
// restarted controller republishes exactly these.
type DesiredRecord struct {
	// Node is the node name, the record's key.
	Node string `json:"node"`
	// Generation is the node's desired generation. It only ever grows for a
	// node, across DeleteDesired and restarts: each node has a high-water
	// mark in the desiredgen bucket that deleting its record keeps.
	Generation uint64                   `json:"generation"`
	Instances  []schema.DesiredInstance `json:"instances"`
	// ConfigMaps and Secrets are the config objects the instances
	// reference, as in schema.DesiredState.
	ConfigMaps []schema.ObjectRef `json:"configMaps,omitempty"`
	Secrets    []schema.ObjectRef `json:"secrets,omitempty"`
	// Prefetch lists the revisions the node is to download before it
	// switches, as in schema.DesiredState.
	Prefetch    []schema.DesiredInstance `json:"prefetch,omitempty"`
	PublishedAt time.Time                `json:"publishedAt,omitzero"`
}

// Wire returns the record as the node's retained desired-state message.
func (r DesiredRecord) Wire() schema.DesiredState {
	instances := r.Instances
	if instances == nil {
		instances = []schema.DesiredInstance{}
	}
	return schema.DesiredState{
		SchemaVersion: schema.WireVersion,
		Node:          r.Node,
		Generation:    r.Generation,
		Instances:     instances,
		ConfigMaps:    r.ConfigMaps,
		Secrets:       r.Secrets,
		Prefetch:      r.Prefetch,
	}
}

// PutDesired stores rec as the node's desired state and returns what was
// stored. A zero rec.Generation is assigned the node's next generation
// (high-water mark + 1); an explicit one must exceed the high-water mark or
// the call fails with ErrStaleGeneration.
func (s *Store) PutDesired(node string, rec DesiredRecord) (DesiredRecord, error) {
	err := s.update(func(tx *boltTx) (err error) {
		rec, err = (&Txn{tx: tx}).PutDesired(node, rec)
		return err
	})
	return rec, s.wrap(err, "put desired state of node %s", node)
}

// PutDesired is Store.PutDesired within the transaction.
func (t *Txn) PutDesired(node string, rec DesiredRecord) (DesiredRecord, error) {
	w, err := newDesiredWriter(t.tx)
	if err != nil {
		return rec, err
	}
	return w.put(node, rec)
}

// PutDesiredBatch stores every node's record in one transaction, all or
// none, with the generation rules of PutDesired, and returns the generation
// stored for each node.
func (s *Store) PutDesiredBatch(recs map[string]DesiredRecord) (map[string]uint64, error) {
	var gens map[string]uint64
	err := s.update(func(tx *boltTx) (err error) {
		gens, err = (&Txn{tx: tx}).PutDesiredBatch(recs)
		return err
	})
	if err != nil {
		return nil, s.wrap(err, "put desired state of %d nodes", len(recs))
	}
	return gens, nil
}

// desiredWriter writes desired records and their high-water marks within
// one transaction.
type desiredWriter struct {
	desired, gens *boltBucket
}

func newDesiredWriter(tx *boltTx) (desiredWriter, error) {
	desired, err := bucket(tx, bucketDesired)
	if err != nil {
		return desiredWriter{}, err
	}
	gens, err := bucket(tx, bucketDesiredGen)
	return desiredWriter{desired: desired, gens: gens}, err
}

func (w desiredWriter) put(node string, rec DesiredRecord) (DesiredRecord, error) {
	rec, err := w.assign(node, rec)
	if err != nil {
		return rec, err
	}
	data, err := encodeDesired(rec)
	if err != nil {
		return rec, err
	}
	return rec, w.write(rec, data)
}

// assign gives rec its generation by PutDesired's rules, against the
// node's high-water mark.
func (w desiredWriter) assign(node string, rec DesiredRecord) (DesiredRecord, error) {
	if node == "" {
		return rec, fmt.Errorf("desired state with empty node name")
	}
	last, err := highWater(w.gens, node)
	if err != nil {
		return rec, err
	}
	switch {
	case rec.Generation == 0:
		rec.Generation = last + 1
	case rec.Generation <= last:
		return rec, fmt.Errorf("node %s: generation %d, last %d: %w", node, rec.Generation, last, ErrStaleGeneration)
	}
	rec.Node = node
	return rec, nil
}

// write stores an assigned record, encoded as data, and its high-water mark.
func (w desiredWriter) write(rec DesiredRecord, data []byte) error {
	if err := w.gens.Put([]byte(rec.Node), u64Key(rec.Generation)); err != nil {
		return fmt.Errorf("write %s/%s: %w", bucketDesiredGen, rec.Node, err)
	}
	if err := w.desired.Put([]byte(rec.Node), data); err != nil {
		return fmt.Errorf("write %s/%s: %w", bucketDesired, rec.Node, err)
	}
	return nil
}

func encodeDesired(rec DesiredRecord) ([]byte, error) {
	data, err := json.Marshal(rec)
	if err != nil {
		return nil, fmt.Errorf("encode %s/%s: %w", bucketDesired, rec.Node, err)
	}
	return data, nil
}

// highWater returns the highest generation stored for node, 0 if none.
func highWater(gens *boltBucket, node string) (uint64, error) {
	v := gens.Get([]byte(node))
	if v == nil {
		return 0, nil
	}
	if len(v) != 8 {
		return 0, fmt.Errorf("%w: %s/%s is %d bytes, want 8", ErrCorrupt, bucketDesiredGen, node, len(v))
	}
	return binary.BigEndian.Uint64(v), nil
}

// NextGeneration returns the generation PutDesired would assign the node
// now: one above the highest it ever stored. It reserves nothing.
func (s *Store) NextGeneration(node string) (uint64, error) {
	var last uint64
	err := s.view(func(tx *boltTx) error {
		gens, err := bucket(tx, bucketDesiredGen)
		if err != nil {
			return err
		}
		last, err = highWater(gens, node)
		return err
	})
	return last + 1, s.wrap(err, "next generation of node %s", node)
}

// GetDesired returns the node's desired record, or an error wrapping
// ErrNotFound.
func (s *Store) GetDesired(node string) (DesiredRecord, error) {
	var rec DesiredRecord
	err := s.view(func(tx *boltTx) error {
		return mustGetJSON(tx, bucketDesired, node, &rec)
	})
	return rec, s.wrap(err, "get desired state of node %s", node)
}

// ListDesired returns every node's desired record, ordered by node name.
func (s *Store) ListDesired() ([]DesiredRecord, error) {
	var recs []DesiredRecord
	err := s.view(func(tx *boltTx) (err error) {
		recs, err = listJSON[DesiredRecord](tx, bucketDesired)
		return err
	})
	return recs, s.wrap(err, "list desired states")
}

// PutDesiredBatch is Store.PutDesiredBatch within the transaction.
func (t *Txn) PutDesiredBatch(recs map[string]DesiredRecord) (map[string]uint64, error) {
	w, err := newDesiredWriter(t.tx)
	if err != nil {
		return nil, err
	}
	nodes := slices.Sorted(maps.Keys(recs))
	assigned := make([]DesiredRecord, len(nodes))
	gens := make(map[string]uint64, len(recs))
	for i, node := range nodes {
		if assigned[i], err = w.assign(node, recs[node]); err != nil {
			return nil, err
		}
		gens[node] = assigned[i].Generation
	}
	// Encoding is most of a large batch's cost and needs nothing of the
	// transaction: it runs on every core, the writes in key order after it.
	encoded := make([][]byte, len(nodes))
	errs := make([]error, len(nodes))
	fanout.Each(len(nodes), encodeChunk, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			encoded[i], errs[i] = encodeDesired(assigned[i])
		}
	})
	for i := range assigned {
		if errs[i] != nil {
			return nil, errs[i]
		}
		if err := w.write(assigned[i], encoded[i]); err != nil {
			return nil, err
		}
	}
	return gens, nil
}

// encodeChunk is the fewest records one goroutine of a batch encodes:
// below two chunks a batch is encoded on the caller's goroutine alone.
const encodeChunk = 256

// DeleteDesired is Store.DeleteDesired within the transaction.
func (t *Txn) DeleteDesired(node string) error { return deleteKey(t.tx, bucketDesired, node) }

// DeleteDesired removes the node's desired record but keeps its generation
// high-water mark, so a node that comes back continues above it. An absent
// record is not an error.
func (s *Store) DeleteDesired(node string) error {
	err := s.update(func(tx *boltTx) error {
		return deleteKey(tx, bucketDesired, node)
	})
	return s.wrap(err, "delete desired state of node %s", node)
}
