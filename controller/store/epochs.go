package store

import (
	"encoding/binary"
	"fmt"
)

// bucketNodeEpochs holds the node credential epochs: node name -> 8-byte
// big-endian epoch (absent: 0). The controller writes them to
// DATA_DIR/node-epochs (credential.EpochsFile), which the broker and the
// NATS auth callout read. Created by the first write, not by a schema
// migration.
var bucketNodeEpochs = []byte("nodeepochs")

// NodeEpochs returns every node's credential epoch above 0.
func (s *Store) NodeEpochs() (map[string]uint64, error) {
	out := map[string]uint64{}
	err := s.view(func(tx *boltTx) error {
		b := tx.Bucket(bucketNodeEpochs)
		if b == nil {
			return nil
		}
		return b.ForEach(func(k, v []byte) error {
			if len(v) != 8 {
				return fmt.Errorf("%w: %s/%s is %d bytes, want 8", ErrCorrupt, bucketNodeEpochs, k, len(v))
			}
			out[string(k)] = binary.BigEndian.Uint64(v)
			return nil
		})
	})
	return out, s.wrap(err, "list node epochs")
}

// BumpNodeEpoch moves node to its next credential epoch and returns it.
func (s *Store) BumpNodeEpoch(node string) (uint64, error) {
	var epoch uint64
	err := s.update(func(tx *boltTx) error {
		b, err := tx.CreateBucketIfNotExists(bucketNodeEpochs)
		if err != nil {
			return err
		}
		if v := b.Get([]byte(node)); len(v) == 8 {
			epoch = binary.BigEndian.Uint64(v)
		}
		epoch++
		return b.Put([]byte(node), u64Key(epoch))
	})
	return epoch, s.wrap(err, "bump credential epoch of node %s", node)
}
