package store

import (
	"go.etcd.io/bbolt"
)

// PutRollout stores v, JSON-encoded, as the rollout state of the daemonset
// key ("namespace/name"). The rollout package owns the encoding.
func (s *Store) PutRollout(key string, v any) error {
	err := s.update(func(tx *bbolt.Tx) error { return (&Txn{tx: tx}).PutRollout(key, v) })
	return s.wrap(err, "put rollout %s", key)
}

// PutRollout is Store.PutRollout within the transaction.
func (t *Txn) PutRollout(key string, v any) error { return putJSON(t.tx, bucketRollouts, key, v) }

// GetRollout decodes the rollout state of the daemonset key into v; found is
// false, and v untouched, when there is none.
func (s *Store) GetRollout(key string, v any) (found bool, err error) {
	err = s.view(func(tx *bbolt.Tx) (err error) {
		found, err = getJSON(tx, bucketRollouts, key, v)
		return err
	})
	return found, s.wrap(err, "get rollout %s", key)
}

// DeleteRollout removes the rollout state of the daemonset key; absent
// state is not an error. DeleteDaemonSet removes it too.
func (s *Store) DeleteRollout(key string) error {
	err := s.update(func(tx *bbolt.Tx) error {
		return deleteKey(tx, bucketRollouts, key)
	})
	return s.wrap(err, "delete rollout %s", key)
}
