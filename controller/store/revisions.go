package store

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/edgeset/edgeset/schema"
	berrors "go.etcd.io/bbolt/errors"
)

// Revision is one immutable template of a daemonset. Revisions live in a
// nested bucket per daemonset ("revisions" / "namespace/name"), keyed by
// template hash.
type Revision struct {
	// Hash is schema.TemplateHash(Template).
	Hash string `json:"hash"`
	// Number is 1 for a daemonset's first revision and grows by one for
	// each new template; numbers are never reused while the daemonset
	// exists, pruned revisions included.
	Number      int64                  `json:"number"`
	DaemonSet   string                 `json:"daemonSet"`
	Template    schema.PodTemplateSpec `json:"template"`
	ChangeCause string                 `json:"changeCause,omitempty"`
	CreatedAt   time.Time              `json:"createdAt"`
}

// Wire returns the revision as published on its retained topic.
func (r Revision) Wire() schema.Revision {
	return schema.Revision{
		SchemaVersion: schema.WireVersion,
		Hash:          r.Hash,
		DaemonSet:     r.DaemonSet,
		Number:        r.Number,
		Template:      r.Template,
	}
}

// EnsureRevision returns the daemonset's revision of template, creating it
// with the next number if no revision has its hash. An existing revision is
// returned unchanged (its number and change cause stay): moving the
// daemonset to it, an undo for instance, is the caller's SetCurrentRevision.
func (s *Store) EnsureRevision(dsKey string, template schema.PodTemplateSpec, changeCause string, now time.Time) (rev Revision, created bool, err error) {
	err = s.update(func(tx *boltTx) error {
		rev, created, err = (&Txn{tx: tx}).EnsureRevision(dsKey, template, changeCause, now)
		if err == nil && !created {
			err = errNoWrite
		}
		return err
	})
	return rev, created, s.wrap(err, "ensure revision %s of daemonset %s", schema.TemplateHash(template), dsKey)
}

// EnsureRevision is Store.EnsureRevision within the transaction.
func (t *Txn) EnsureRevision(dsKey string, template schema.PodTemplateSpec, changeCause string, now time.Time) (rev Revision, created bool, err error) {
	hash := schema.TemplateHash(template)
	b, err := revisionBucket(t.tx, dsKey, true)
	if err != nil {
		return rev, false, err
	}
	if found, err := decodeRevision(b, dsKey, hash, &rev); err != nil || found {
		return rev, false, err
	}
	n, err := b.NextSequence()
	if err != nil {
		return rev, false, err
	}
	rev = Revision{Hash: hash, Number: int64(n), DaemonSet: dsKey, Template: template,
		ChangeCause: changeCause, CreatedAt: now}
	return rev, true, putJSONIn(b, revisionBucketName(dsKey), []byte(hash), rev)
}

// ListRevisions is Store.ListRevisions within the transaction.
func (t *Txn) ListRevisions(dsKey string) ([]Revision, error) {
	return listRevisions(t.tx, dsKey)
}

// GetRevision is Store.GetRevision within the transaction.
func (t *Txn) GetRevision(dsKey, hash string) (Revision, error) {
	return getRevision(t.tx, dsKey, hash)
}

// GetRevision returns the daemonset's revision with hash, or an error
// wrapping ErrNotFound.
func (s *Store) GetRevision(dsKey, hash string) (Revision, error) {
	var rev Revision
	err := s.view(func(tx *boltTx) (err error) {
		rev, err = getRevision(tx, dsKey, hash)
		return err
	})
	return rev, s.wrap(err, "get revision %s of daemonset %s", hash, dsKey)
}

// RevisionsByHash returns every daemonset's revision with hash, ordered by
// daemonset key. A template hash covers the template only, so daemonsets
// with equal templates share it; all returned revisions hold that same
// template. It costs one lookup per daemonset. None is an error wrapping
// ErrNotFound.
func (s *Store) RevisionsByHash(hash string) ([]Revision, error) {
	var revs []Revision
	err := s.view(func(tx *boltTx) error {
		root, err := bucket(tx, bucketRevisions)
		if err != nil {
			return err
		}
		err = root.ForEachBucket(func(dsKey []byte) error {
			var rev Revision
			found, err := decodeRevision(root.Bucket(dsKey), string(dsKey), hash, &rev)
			if found {
				revs = append(revs, rev)
			}
			return err
		})
		if err == nil && len(revs) == 0 {
			err = ErrNotFound
		}
		return err
	})
	return revs, s.wrap(err, "get revisions with hash %s", hash)
}

// ListRevisions returns the daemonset's revisions ordered by number; none
// for an unknown daemonset.
func (s *Store) ListRevisions(dsKey string) ([]Revision, error) {
	var revs []Revision
	err := s.view(func(tx *boltTx) (err error) {
		revs, err = listRevisions(tx, dsKey)
		return err
	})
	return revs, s.wrap(err, "list revisions of daemonset %s", dsKey)
}

// PruneRevisions deletes the daemonset's oldest revisions beyond keep
// (a revision history limit) and returns their hashes. Only old revisions
// count and are deleted: never the daemonset's CurrentRevision nor a hash
// in inUse (instances still published or running it).
func (s *Store) PruneRevisions(dsKey string, keep int, inUse map[string]bool) (pruned []string, err error) {
	err = s.update(func(tx *boltTx) (err error) {
		if pruned, err = (&Txn{tx: tx}).PruneRevisions(dsKey, keep, inUse); err == nil && len(pruned) == 0 {
			err = errNoWrite
		}
		return err
	})
	return pruned, s.wrap(err, "prune revisions of daemonset %s", dsKey)
}

// PruneRevisions is Store.PruneRevisions within the transaction.
func (t *Txn) PruneRevisions(dsKey string, keep int, inUse map[string]bool) (pruned []string, err error) {
	revs, err := listRevisions(t.tx, dsKey)
	if err != nil || len(revs) == 0 {
		return nil, err
	}
	var ds DaemonSetRecord
	if _, err := getJSON(t.tx, bucketDaemonSets, dsKey, &ds); err != nil {
		return nil, err
	}
	pruned = prunable(revs, keep, ds.CurrentRevision, inUse)
	if len(pruned) == 0 {
		return nil, nil
	}
	b, err := revisionBucket(t.tx, dsKey, false)
	if err != nil {
		return nil, err
	}
	for _, hash := range pruned {
		if err := b.Delete([]byte(hash)); err != nil {
			return nil, fmt.Errorf("delete %s/%s: %w", revisionBucketName(dsKey), hash, err)
		}
	}
	return pruned, nil
}

// prunable picks, from revisions ordered by number, the old ones (neither
// current nor in use) beyond the newest keep of them.
func prunable(revs []Revision, keep int, current string, inUse map[string]bool) []string {
	var old []string
	for _, r := range revs {
		if r.Hash != current && !inUse[r.Hash] {
			old = append(old, r.Hash)
		}
	}
	if excess := len(old) - max(keep, 0); excess > 0 {
		return old[:excess]
	}
	return nil
}

// revisionBucket returns the daemonset's nested revision bucket, creating
// it when create is set. Without create, a missing bucket is ErrNotFound.
func revisionBucket(tx *boltTx, dsKey string, create bool) (*boltBucket, error) {
	root, err := bucket(tx, bucketRevisions)
	if err != nil {
		return nil, err
	}
	if create {
		b, err := root.CreateBucketIfNotExists([]byte(dsKey))
		if err != nil {
			return nil, fmt.Errorf("create bucket %s: %w", revisionBucketName(dsKey), err)
		}
		return b, nil
	}
	b := root.Bucket([]byte(dsKey))
	if b == nil {
		return nil, fmt.Errorf("bucket %s: %w", revisionBucketName(dsKey), ErrNotFound)
	}
	return b, nil
}

func revisionBucketName(dsKey string) []byte {
	return []byte(string(bucketRevisions) + "/" + dsKey)
}

// decodeRevision reads hash from the nested bucket b into rev.
func decodeRevision(b *boltBucket, dsKey, hash string, rev *Revision) (found bool, err error) {
	data := b.Get([]byte(hash))
	if data == nil {
		return false, nil
	}
	if err := json.Unmarshal(data, rev); err != nil {
		return true, fmt.Errorf("decode %s/%s: %w", revisionBucketName(dsKey), hash, err)
	}
	return true, nil
}

func getRevision(tx *boltTx, dsKey, hash string) (Revision, error) {
	var rev Revision
	b, err := revisionBucket(tx, dsKey, false)
	if err != nil {
		return rev, err
	}
	found, err := decodeRevision(b, dsKey, hash, &rev)
	if err == nil && !found {
		err = fmt.Errorf("%s/%s: %w", revisionBucketName(dsKey), hash, ErrNotFound)
	}
	return rev, err
}

// listRevisions returns the daemonset's revisions ordered by number.
func listRevisions(tx *boltTx, dsKey string) ([]Revision, error) {
	b, err := revisionBucket(tx, dsKey, false)
	if errors.Is(err, ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var revs []Revision
	err = b.ForEach(func(k, data []byte) error {
		var rev Revision
		if err := json.Unmarshal(data, &rev); err != nil {
			return fmt.Errorf("decode %s/%s: %w", revisionBucketName(dsKey), k, err)
		}
		revs = append(revs, rev)
		return nil
	})
	slices.SortFunc(revs, func(a, b Revision) int { return cmp.Compare(a.Number, b.Number) })
	return revs, err
}

// deleteRevisions drops the daemonset's whole revision history.
func deleteRevisions(tx *boltTx, dsKey string) error {
	root, err := bucket(tx, bucketRevisions)
	if err != nil {
		return err
	}
	err = root.DeleteBucket([]byte(dsKey))
	if err != nil && !errors.Is(err, berrors.ErrBucketNotFound) {
		return fmt.Errorf("delete bucket %s: %w", revisionBucketName(dsKey), err)
	}
	return nil
}
