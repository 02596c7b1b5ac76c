package store

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
)

// bucket returns the top-level bucket name; a missing one means the file
// was damaged after Open created it.
func bucket(tx *boltTx, name []byte) (*boltBucket, error) {
	b := tx.Bucket(name)
	if b == nil {
		return nil, fmt.Errorf("%w: bucket %s missing", ErrCorrupt, name)
	}
	return b, nil
}

// getJSON decodes the value under key of bucket name into v. found is false
// when there is none.
func getJSON(tx *boltTx, name []byte, key string, v any) (found bool, err error) {
	b, err := bucket(tx, name)
	if err != nil {
		return false, err
	}
	data := b.Get([]byte(key))
	if data == nil {
		return false, nil
	}
	if err := json.Unmarshal(data, v); err != nil {
		return true, fmt.Errorf("decode %s/%s: %w", name, key, err)
	}
	return true, nil
}

// mustGetJSON is getJSON with ErrNotFound for a missing key.
func mustGetJSON(tx *boltTx, name []byte, key string, v any) error {
	found, err := getJSON(tx, name, key, v)
	if err == nil && !found {
		err = fmt.Errorf("%s/%s: %w", name, key, ErrNotFound)
	}
	return err
}

// putJSON encodes v under key of bucket name.
func putJSON(tx *boltTx, name []byte, key string, v any) error {
	b, err := bucket(tx, name)
	if err != nil {
		return err
	}
	return putJSONIn(b, name, []byte(key), v)
}

func putJSONIn(b *boltBucket, name, key []byte, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode %s/%s: %w", name, key, err)
	}
	if err := b.Put(key, data); err != nil {
		return fmt.Errorf("write %s/%s: %w", name, key, err)
	}
	return nil
}

// deleteKey removes key from bucket name; a missing key is not an error.
func deleteKey(tx *boltTx, name []byte, key string) error {
	b, err := bucket(tx, name)
	if err != nil {
		return err
	}
	if err := b.Delete([]byte(key)); err != nil {
		return fmt.Errorf("delete %s/%s: %w", name, key, err)
	}
	return nil
}

// listJSON decodes every value of bucket name, in key order. Nested
// buckets are skipped.
func listJSON[T any](tx *boltTx, name []byte) ([]T, error) {
	b, err := bucket(tx, name)
	if err != nil {
		return nil, err
	}
	var out []T
	err = b.ForEach(func(k, data []byte) error {
		if data == nil {
			return nil
		}
		var v T
		if err := json.Unmarshal(data, &v); err != nil {
			return fmt.Errorf("decode %s/%s: %w", name, k, err)
		}
		out = append(out, v)
		return nil
	})
	return out, err
}

// u64Key encodes n big-endian, so byte order is numeric order.
func u64Key(n uint64) []byte {
	return binary.BigEndian.AppendUint64(make([]byte, 0, 8), n)
}
