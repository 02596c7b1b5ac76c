package store

import (
	"time"

	"github.com/edgeset/edgeset/schema"
	"go.etcd.io/bbolt"
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
	o.Node = node
	err := s.update(func(tx *bbolt.Tx) error {
		return putJSON(tx, bucketNodeOverrides, node, o)
	})
	return s.wrap(err, "put overrides of node %s", node)
}

// GetOverrides returns the node's overrides, or an error wrapping
// ErrNotFound.
func (s *Store) GetOverrides(node string) (NodeOverrides, error) {
	var o NodeOverrides
	err := s.view(func(tx *bbolt.Tx) error {
		return mustGetJSON(tx, bucketNodeOverrides, node, &o)
	})
	return o, s.wrap(err, "get overrides of node %s", node)
}

// ListOverrides returns every node's overrides, ordered by node name.
func (s *Store) ListOverrides() ([]NodeOverrides, error) {
	var list []NodeOverrides
	err := s.view(func(tx *bbolt.Tx) (err error) {
		list, err = listJSON[NodeOverrides](tx, bucketNodeOverrides)
		return err
	})
	return list, s.wrap(err, "list node overrides")
}

// DeleteOverrides removes the node's overrides; absent ones are not an
// error.
func (s *Store) DeleteOverrides(node string) error {
	err := s.update(func(tx *bbolt.Tx) error {
		return deleteKey(tx, bucketNodeOverrides, node)
	})
	return s.wrap(err, "delete overrides of node %s", node)
}
