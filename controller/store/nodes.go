package store

import (
	"fmt"
	"time"

	"github.com/edgeset/edgeset/schema"
)

// NodeRecord is the last known announcement and presence of a node, stored
// in the nodes bucket under its name, so a restarted controller knows its
// fleet before the retained status messages arrive again.
type NodeRecord struct {
	// Name is the node name, the record's key.
	Name   string            `json:"name"`
	Status schema.NodeStatus `json:"status"`
	Online bool              `json:"online"`
	// Session is the Presence.Session of the last presence message.
	Session      int64     `json:"session,omitempty"`
	LastSeen     time.Time `json:"lastSeen,omitzero"`
	OfflineSince time.Time `json:"offlineSince,omitzero"`
}

// PutNode stores rec under rec.Name. Concurrent calls are coalesced into
// one transaction (bbolt Batch), which adds up to 10 ms of latency to a
// lone caller; a single goroutine with many records should use PutNodes.
func (s *Store) PutNode(rec NodeRecord) error {
	if rec.Name == "" {
		return fmt.Errorf("store %s: put node: name is empty", s.path)
	}
	err := s.batch(func(tx *boltTx) error {
		return putJSON(tx, bucketNodes, rec.Name, rec)
	})
	return s.wrap(err, "put node %s", rec.Name)
}

// PutNodes stores every record in one transaction: all or none.
func (s *Store) PutNodes(recs []NodeRecord) error {
	err := s.update(func(tx *boltTx) error {
		for _, rec := range recs {
			if rec.Name == "" {
				return fmt.Errorf("node record with empty name")
			}
			if err := putJSON(tx, bucketNodes, rec.Name, rec); err != nil {
				return err
			}
		}
		return nil
	})
	return s.wrap(err, "put %d nodes", len(recs))
}

// GetNode returns the node's record, or an error wrapping ErrNotFound.
func (s *Store) GetNode(name string) (NodeRecord, error) {
	var rec NodeRecord
	err := s.view(func(tx *boltTx) error {
		return mustGetJSON(tx, bucketNodes, name, &rec)
	})
	return rec, s.wrap(err, "get node %s", name)
}

// ListNodes returns every node record, ordered by name.
func (s *Store) ListNodes() ([]NodeRecord, error) {
	var recs []NodeRecord
	err := s.view(func(tx *boltTx) (err error) {
		recs, err = listJSON[NodeRecord](tx, bucketNodes)
		return err
	})
	return recs, s.wrap(err, "list nodes")
}

// DeleteNode removes the node's record (not its overrides nor its desired
// state); an absent record is not an error.
func (s *Store) DeleteNode(name string) error {
	err := s.update(func(tx *boltTx) error { return (&Txn{tx: tx}).DeleteNode(name) })
	return s.wrap(err, "delete node %s", name)
}

// DeleteNode is Store.DeleteNode within the transaction.
func (t *Txn) DeleteNode(name string) error { return deleteKey(t.tx, bucketNodes, name) }
