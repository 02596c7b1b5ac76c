package store

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	berrors "go.etcd.io/bbolt/errors"
)

// A daemonset's rollout state is stored in parts, so that a pass that
// changes a few nodes' entries writes those and not the whole state: a
// head (the state without its per-node maps) under the daemonset's key in
// the rollouts bucket, and each node's entry under the node's name in the
// daemonset's nested bucket of the rolloutnodes bucket. The rollout
// package owns both encodings; the store keeps them together. Records
// written before schema 3 are a whole state in the head with no entries:
// they load as they are, and a caller's first write replaces them.

// RolloutEntry is one node's entry of a rollout state, for
// PutRolloutParts: Value is JSON-encoded; a nil Value deletes the node's
// entry.
type RolloutEntry struct {
	Node  string
	Value any
}

// replaceFillPercent fills the pages of a replaced bucket of entries,
// written in key order, fuller than bbolt's default: a rollout's later
// writes mostly replace entries with ones of about the same size.
const replaceFillPercent = 0.9

// PutRolloutParts stores, JSON-encoded, head as the rollout state of the
// daemonset key ("namespace/name") and entries as its nodes' entries (one
// per node; sorted by node in place when they are not). With replace the
// daemonset's other entries are dropped first, so that head and entries
// are the whole state. A failed write keeps nothing of the call (the
// transaction is the caller's).
func (t *Txn) PutRolloutParts(key string, head any, entries []RolloutEntry, replace bool) error {
	if err := putJSON(t.tx, bucketRollouts, key, head); err != nil {
		return err
	}
	if replace {
		if err := deleteRolloutEntries(t.tx, key); err != nil {
			return err
		}
	}
	if len(entries) == 0 {
		return nil
	}
	b, err := rolloutEntries(t.tx, key)
	if err != nil {
		return err
	}
	if replace {
		b.setFillPercent(replaceFillPercent)
	}
	byNode := func(a, b RolloutEntry) int { return strings.Compare(a.Node, b.Node) }
	if !slices.IsSortedFunc(entries, byNode) {
		slices.SortFunc(entries, byNode) // key order writes pages in order
	}
	name := []byte(rolloutEntriesName(key))
	for _, e := range entries {
		if e.Value != nil {
			err = putJSONIn(b, name, []byte(e.Node), e.Value)
		} else if err = b.Delete([]byte(e.Node)); err != nil {
			err = fmt.Errorf("delete %s/%s: %w", name, e.Node, err)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// PutRolloutParts is Txn.PutRolloutParts in a transaction of its own.
func (s *Store) PutRolloutParts(key string, head any, entries []RolloutEntry, replace bool) error {
	err := s.update(func(tx *boltTx) error {
		return (&Txn{tx: tx}).PutRolloutParts(key, head, entries, replace)
	})
	return s.wrap(err, "put rollout %s", key)
}

// GetRolloutParts decodes the rollout head of the daemonset key into head
// and passes each of its nodes' entries, in node order, to entry, which
// owns the decoding and must not keep raw past its call. found is false,
// and head untouched, when there is no head; entry's error ends the read
// and is returned, wrapped.
func (s *Store) GetRolloutParts(key string, head any, entry func(node string, raw []byte) error) (found bool, err error) {
	err = s.view(func(tx *boltTx) (err error) {
		if found, err = getJSON(tx, bucketRollouts, key, head); err != nil || !found {
			return err
		}
		b := rolloutEntriesOf(tx, key)
		if b == nil {
			return nil
		}
		return b.ForEach(func(node, raw []byte) error {
			if err := entry(string(node), raw); err != nil {
				return fmt.Errorf("decode %s/%s: %w", rolloutEntriesName(key), node, err)
			}
			return nil
		})
	})
	return found, s.wrap(err, "get rollout %s", key)
}

// DeleteRollout removes the rollout state of the daemonset key, head and
// entries; absent state is not an error. DeleteDaemonSet removes it too.
func (s *Store) DeleteRollout(key string) error {
	err := s.update(func(tx *boltTx) error { return deleteRollout(tx, key) })
	return s.wrap(err, "delete rollout %s", key)
}

func deleteRollout(tx *boltTx, key string) error {
	if err := deleteKey(tx, bucketRollouts, key); err != nil {
		return err
	}
	return deleteRolloutEntries(tx, key)
}

// rolloutEntries returns the daemonset key's bucket of node entries,
// creating it.
func rolloutEntries(tx *boltTx, key string) (*boltBucket, error) {
	root, err := bucket(tx, bucketRolloutNodes)
	if err != nil {
		return nil, err
	}
	b, err := root.CreateBucketIfNotExists([]byte(key))
	if err != nil {
		return nil, fmt.Errorf("create bucket %s: %w", rolloutEntriesName(key), err)
	}
	return b, nil
}

// rolloutEntriesOf returns the daemonset key's bucket of node entries, nil
// when it has none (or the store predates schema 3: a read-only open of an
// older file).
func rolloutEntriesOf(tx *boltTx, key string) *boltBucket {
	if root := tx.Bucket(bucketRolloutNodes); root != nil {
		return root.Bucket([]byte(key))
	}
	return nil
}

func deleteRolloutEntries(tx *boltTx, key string) error {
	root, err := bucket(tx, bucketRolloutNodes)
	if err != nil {
		return err
	}
	err = root.DeleteBucket([]byte(key))
	if err != nil && !errors.Is(err, berrors.ErrBucketNotFound) {
		return fmt.Errorf("delete bucket %s: %w", rolloutEntriesName(key), err)
	}
	return nil
}

// rolloutEntriesName names the bucket of the daemonset key's node
// entries in errors.
func rolloutEntriesName(key string) string { return string(bucketRolloutNodes) + "/" + key }
