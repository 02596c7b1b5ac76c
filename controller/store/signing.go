package store

import "bytes"

// bucketSigning holds the signing state the controllers of a fleet
// share: keyKeySet -> the key set envelope the fleet root signed (issue
// 18). It lives in the store, not in a data directory, so that an HA
// controller taking over publishes the key set its predecessor adopted
// (the store is replicated through etcd). Created by the first write.
var bucketSigning = []byte("signing")

var keyKeySet = []byte("keyset")

// KeySet returns the stored key set envelope; nil when none was stored.
func (s *Store) KeySet() ([]byte, error) {
	var env []byte
	err := s.view(func(tx *boltTx) error {
		if b := tx.Bucket(bucketSigning); b != nil {
			env = bytes.Clone(b.Get(keyKeySet))
		}
		return nil
	})
	return env, s.wrap(err, "read the key set")
}

// PutKeySet stores env as the key set envelope, replacing the previous
// one. The caller checks it (its signature, its version).
func (s *Store) PutKeySet(env []byte) error {
	err := s.update(func(tx *boltTx) error {
		b, err := tx.CreateBucketIfNotExists(bucketSigning)
		if err != nil {
			return err
		}
		return b.Put(keyKeySet, env)
	})
	return s.wrap(err, "store the key set")
}
