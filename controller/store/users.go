package store

import (
	"encoding/json"
	"fmt"

	"github.com/edgeset/edgeset/controller/access"
)

// bucketUsers holds the API users: name -> access.User (its token only as
// a hash). Created by the first write rather than by a schema migration,
// so that a store without users reads as one with none.
var bucketUsers = []byte("users")

var _ access.Store = (*Store)(nil)

// ListUsers returns every API user, in name order.
func (s *Store) ListUsers() ([]access.User, error) {
	var out []access.User
	err := s.view(func(tx *boltTx) error {
		b := tx.Bucket(bucketUsers)
		if b == nil {
			return nil
		}
		return b.ForEach(func(k, v []byte) error {
			var u access.User
			if err := json.Unmarshal(v, &u); err != nil {
				return fmt.Errorf("%w: decode %s/%s: %w", ErrCorrupt, bucketUsers, k, err)
			}
			out = append(out, u)
			return nil
		})
	})
	return out, s.wrap(err, "list users")
}

// PutUser stores u under u.Name, replacing any user of that name.
func (s *Store) PutUser(u access.User) error {
	err := s.update(func(tx *boltTx) error {
		b, err := tx.CreateBucketIfNotExists(bucketUsers)
		if err != nil {
			return err
		}
		return putJSONIn(b, bucketUsers, []byte(u.Name), u)
	})
	return s.wrap(err, "put user %s", u.Name)
}

// DeleteUser removes the user name; a missing user is ErrNotFound.
func (s *Store) DeleteUser(name string) error {
	err := s.update(func(tx *boltTx) error {
		b := tx.Bucket(bucketUsers)
		if b == nil || b.Get([]byte(name)) == nil {
			return ErrNotFound
		}
		return b.Delete([]byte(name))
	})
	return s.wrap(err, "delete user %s", name)
}
