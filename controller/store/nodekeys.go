package store

import (
	"encoding/json"
	"fmt"
	"time"
)

// bucketNodeKeys holds each node's sealing key: node name -> NodeKeyRecord.
// Created by the first write, not by a schema migration.
var bucketNodeKeys = []byte("nodekeys")

// NodeKeyRecord is the X25519 public key a node registered: the
// controller seals that node's Secrets to it (package sealing).
type NodeKeyRecord struct {
	Node string `json:"node"`
	// PublicKey is the key's text form ("x25519:" and base64).
	PublicKey string `json:"publicKey"`
	// KeyID is the key's ID (sealing.PublicKey.KeyID).
	KeyID        string    `json:"keyId"`
	RegisteredAt time.Time `json:"registeredAt"`
	// Source says how the key came: at enrollment, by the node over its
	// authenticated HTTPS call (first key, or a rotation it proved), or
	// set by an admin.
	Source string `json:"source"`
}

// PutNodeKey stores rec as its node's key, replacing any other.
func (s *Store) PutNodeKey(rec NodeKeyRecord) error {
	err := s.update(func(tx *boltTx) error {
		b, err := tx.CreateBucketIfNotExists(bucketNodeKeys)
		if err != nil {
			return err
		}
		return putJSONIn(b, bucketNodeKeys, []byte(rec.Node), rec)
	})
	return s.wrap(err, "store the key of node %s", rec.Node)
}

// DeleteNodeKey forgets node's key; found is false when it had none.
func (s *Store) DeleteNodeKey(node string) (found bool, err error) {
	err = s.update(func(tx *boltTx) error {
		b := tx.Bucket(bucketNodeKeys)
		if b == nil || b.Get([]byte(node)) == nil {
			return errNoWrite
		}
		found = true
		return b.Delete([]byte(node))
	})
	return found, s.wrap(err, "forget the key of node %s", node)
}

// ListNodeKeys returns every node's key record, by node name.
func (s *Store) ListNodeKeys() (map[string]NodeKeyRecord, error) {
	out := map[string]NodeKeyRecord{}
	err := s.view(func(tx *boltTx) error {
		b := tx.Bucket(bucketNodeKeys)
		if b == nil {
			return nil
		}
		return b.ForEach(func(k, v []byte) error {
			var rec NodeKeyRecord
			if err := json.Unmarshal(v, &rec); err != nil {
				return fmt.Errorf("decode %s/%s: %w", bucketNodeKeys, k, err)
			}
			out[string(k)] = rec
			return nil
		})
	})
	return out, s.wrap(err, "list node keys")
}
