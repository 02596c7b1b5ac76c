package store

import (
	"time"

	"github.com/edgeset/edgeset/schema"
)

// NodeOverrides are the operator's changes to what a node announces,
// stored in the nodeoverrides bucket under the node name. They outlive the
// node's announcements: an override is applied to every later status.
type NodeOverrides struct {
	// Node is the node name, the record's key.
	Node string `json:"node"`
	// Labels sets (non-nil value) or removes (nil value) labels over the
	// announced ones.
	Labels map[string]*string `json:"labels,omitempty"`
	// Taints are added to (or replace, by key and effect) the announced
	// taints.
	Taints []schema.Taint `json:"taints,omitempty"`
	// RemovedTaints removes announced taints, each written "key:effect".
	RemovedTaints []string `json:"removedTaints,omitempty"`
	// Unschedulable, when set, overrides the node's schedulability
	// (cordon, uncordon).
	Unschedulable *bool     `json:"unschedulable,omitempty"`
	UpdatedAt     time.Time `json:"updatedAt"`
}

// PutOverrides replaces the node's overrides; o.Node is set to node.
func (s *Store) PutOverrides(node string, o NodeOverrides) error {
	err := s.update(func(tx *boltTx) error { return (&Txn{tx: tx}).PutOverrides(node, o) })
	return s.wrap(err, "put overrides of node %s", node)
}

// PutOverrides is Store.PutOverrides within the transaction.
func (t *Txn) PutOverrides(node string, o NodeOverrides) error {
	o.Node = node
	return putJSON(t.tx, bucketNodeOverrides, node, o)
}

// GetOverrides returns the node's overrides; found is false, and o zero,
// when it has none.
func (t *Txn) GetOverrides(node string) (o NodeOverrides, found bool, err error) {
	found, err = getJSON(t.tx, bucketNodeOverrides, node, &o)
	return o, found, err
}

// UpdateOverrides reads the node's overrides (zero when it has none),
// lets fn change them and stores the result, in one transaction: two
// concurrent updates of one node never lose either's change. When fn
// fails nothing is written and its error is returned unwrapped.
func (s *Store) UpdateOverrides(node string, fn func(o *NodeOverrides) error) (NodeOverrides, error) {
	var o NodeOverrides
	var fnErr error
	err := s.update(func(tx *boltTx) (err error) {
		t := &Txn{tx: tx}
		if o, _, err = t.GetOverrides(node); err != nil {
			return err
		}
		if fnErr = fn(&o); fnErr != nil {
			return fnErr
		}
		o.Node = node
		return t.PutOverrides(node, o)
	})
	if fnErr != nil {
		return o, fnErr
	}
	return o, s.wrap(err, "update overrides of node %s", node)
}

// GetOverrides returns the node's overrides, or an error wrapping
// ErrNotFound.
func (s *Store) GetOverrides(node string) (NodeOverrides, error) {
	var o NodeOverrides
	err := s.view(func(tx *boltTx) error {
		return mustGetJSON(tx, bucketNodeOverrides, node, &o)
	})
	return o, s.wrap(err, "get overrides of node %s", node)
}

// ListOverrides returns every node's overrides, ordered by node name.
func (s *Store) ListOverrides() ([]NodeOverrides, error) {
	var list []NodeOverrides
	err := s.view(func(tx *boltTx) (err error) {
		list, err = listJSON[NodeOverrides](tx, bucketNodeOverrides)
		return err
	})
	return list, s.wrap(err, "list node overrides")
}

// DeleteOverrides removes the node's overrides; absent ones are not an
// error.
func (s *Store) DeleteOverrides(node string) error {
	err := s.update(func(tx *boltTx) error { return (&Txn{tx: tx}).DeleteOverrides(node) })
	return s.wrap(err, "delete overrides of node %s", node)
}

// DeleteOverrides is Store.DeleteOverrides within the transaction.
func (t *Txn) DeleteOverrides(node string) error { return deleteKey(t.tx, bucketNodeOverrides, node) }
