package store

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/edgeset/edgeset/schema"
)

// DaemonSetRecord is a declared daemonset with the controller's bookkeeping,
// stored in the daemonsets bucket under "namespace/name".
type DaemonSetRecord struct {
	// DaemonSet is the manifest as last applied, namespace defaulted.
	DaemonSet schema.DaemonSet `json:"daemonSet"`
	// Generation starts at 1 and grows by one each time the spec changes;
	// metadata-only changes keep it.
	Generation int64 `json:"generation"`
	// CurrentRevision is the template hash the daemonset rolls towards; the
	// caller sets it with SetCurrentRevision.
	CurrentRevision string `json:"currentRevision,omitempty"`
	// DeletedAt is set by MarkDaemonSetDeleted while the caller winds the
	// daemonset down; DeleteDaemonSet removes the record.
	DeletedAt *time.Time `json:"deletedAt,omitempty"`
	CreatedAt time.Time  `json:"createdAt"`
	UpdatedAt time.Time  `json:"updatedAt"`
	// Source says who applied the daemonset last: "file:PATH" for the
	// watched manifests directory, "cli:PATH" for edgesetctl apply -f PATH,
	// empty for any other API client. PutDaemonSet keeps it; the caller
	// sets it with SetDaemonSetSource.
	Source string `json:"source,omitempty"`
	// Rejected is the revision an automatic rollback abandoned, while the
	// daemonset's template is the one it rolled back to; the caller sets
	// it with RollBack and clears it with SetRejected.
	Rejected *RejectedRevision `json:"rejected,omitempty"`
}

// RejectedRevision is a revision an automatic rollback abandoned, and why.
type RejectedRevision struct {
	Hash   string    `json:"hash"`
	Number int64     `json:"number"`
	Reason string    `json:"reason"`
	Time   time.Time `json:"time"`
}

// Key returns the record's "namespace/name".
func (r *DaemonSetRecord) Key() string { return r.DaemonSet.Key() }

// PutDaemonSet applies ds (namespace defaulted; ds itself is not modified).
// A new daemonset gets generation 1; a changed spec increments the
// generation; a metadata-only change keeps it. Applying what is stored is a
// no-op that writes nothing and reports changed false. Re-applying a
// daemonset marked deleted clears DeletedAt and counts as a change.
func (s *Store) PutDaemonSet(ds *schema.DaemonSet, now time.Time) (rec DaemonSetRecord, changed bool, err error) {
	err = s.update(func(tx *boltTx) error {
		rec, changed, err = (&Txn{tx: tx}).PutDaemonSet(ds, now)
		if err == nil && !changed {
			err = errNoWrite
		}
		return err
	})
	return rec, changed, s.wrap(err, "put daemonset %s", ds.Key())
}

// PutDaemonSet is Store.PutDaemonSet within the transaction.
func (t *Txn) PutDaemonSet(ds *schema.DaemonSet, now time.Time) (rec DaemonSetRecord, changed bool, err error) {
	if ds.Metadata.Name == "" {
		return rec, false, errors.New("put daemonset: metadata.name is empty")
	}
	applied := *ds
	applied.Metadata.Namespace = namespaceOf(ds)
	key := applied.Key()
	var old DaemonSetRecord
	found, err := getJSON(t.tx, bucketDaemonSets, key, &old)
	if err != nil {
		return rec, false, err
	}
	rec, changed, err = applyDaemonSet(old, found, applied, now)
	if err != nil || !changed {
		return rec, false, err
	}
	return rec, true, putJSON(t.tx, bucketDaemonSets, key, rec)
}

func namespaceOf(ds *schema.DaemonSet) string {
	if ds.Metadata.Namespace == "" {
		return schema.DefaultNamespace
	}
	return ds.Metadata.Namespace
}

// applyDaemonSet computes the record after applying ds over old.
func applyDaemonSet(old DaemonSetRecord, found bool, ds schema.DaemonSet, now time.Time) (DaemonSetRecord, bool, error) {
	if !found {
		return DaemonSetRecord{DaemonSet: ds, Generation: 1, CreatedAt: now, UpdatedAt: now}, true, nil
	}
	specChanged, err := jsonDiffers(old.DaemonSet.Spec, ds.Spec)
	if err != nil {
		return old, false, err
	}
	anyChanged, err := jsonDiffers(old.DaemonSet, ds)
	if err != nil {
		return old, false, err
	}
	if !anyChanged && old.DeletedAt == nil {
		return old, false, nil
	}
	rec := old
	rec.DaemonSet = ds
	rec.DeletedAt = nil
	rec.UpdatedAt = now
	if specChanged {
		rec.Generation++
	}
	return rec, true, nil
}

// jsonDiffers compares the canonical JSON encodings of a and b
// (encoding/json sorts map keys).
func jsonDiffers(a, b any) (bool, error) {
	ja, err := json.Marshal(a)
	if err != nil {
		return false, fmt.Errorf("encode: %w", err)
	}
	jb, err := json.Marshal(b)
	if err != nil {
		return false, fmt.Errorf("encode: %w", err)
	}
	return !bytes.Equal(ja, jb), nil
}

// GetDaemonSet returns the record under key ("namespace/name"), or an error
// wrapping ErrNotFound.
func (s *Store) GetDaemonSet(key string) (DaemonSetRecord, error) {
	var rec DaemonSetRecord
	err := s.view(func(tx *boltTx) error {
		return mustGetJSON(tx, bucketDaemonSets, key, &rec)
	})
	return rec, s.wrap(err, "get daemonset %s", key)
}

// ListDaemonSets returns every record, ordered by key, including those
// marked deleted.
func (s *Store) ListDaemonSets() ([]DaemonSetRecord, error) {
	var recs []DaemonSetRecord
	err := s.view(func(tx *boltTx) (err error) {
		recs, err = listJSON[DaemonSetRecord](tx, bucketDaemonSets)
		return err
	})
	return recs, s.wrap(err, "list daemonsets")
}

// SetCurrentRevision points the daemonset at the revision with hash, which
// must exist (see EnsureRevision). Setting the current value again writes
// nothing.
func (s *Store) SetCurrentRevision(key, hash string, now time.Time) (DaemonSetRecord, error) {
	var rec DaemonSetRecord
	err := s.update(func(tx *boltTx) (err error) {
		var changed bool
		rec, changed, err = (&Txn{tx: tx}).SetCurrentRevision(key, hash, now)
		if err == nil && !changed {
			err = errNoWrite
		}
		return err
	})
	return rec, s.wrap(err, "set current revision of daemonset %s to %s", key, hash)
}

// SetCurrentRevision is Store.SetCurrentRevision within the transaction;
// changed is false when hash was current already.
func (t *Txn) SetCurrentRevision(key, hash string, now time.Time) (rec DaemonSetRecord, changed bool, err error) {
	if err := mustGetJSON(t.tx, bucketDaemonSets, key, &rec); err != nil {
		return rec, false, err
	}
	if rec.CurrentRevision == hash {
		return rec, false, nil
	}
	if _, err := getRevision(t.tx, key, hash); err != nil {
		return rec, false, err
	}
	rec.CurrentRevision, rec.UpdatedAt = hash, now
	return rec, true, putJSON(t.tx, bucketDaemonSets, key, rec)
}

// SetDaemonSetSource records who applied the daemonset last. Setting the
// current value again writes nothing; UpdatedAt is kept, as the source is
// bookkeeping, not part of the daemonset.
func (s *Store) SetDaemonSetSource(key, source string) (DaemonSetRecord, error) {
	var rec DaemonSetRecord
	err := s.update(func(tx *boltTx) (err error) {
		var changed bool
		rec, changed, err = (&Txn{tx: tx}).SetDaemonSetSource(key, source)
		if err == nil && !changed {
			err = errNoWrite
		}
		return err
	})
	return rec, s.wrap(err, "set source of daemonset %s", key)
}

// SetDaemonSetSource is Store.SetDaemonSetSource within the transaction.
func (t *Txn) SetDaemonSetSource(key, source string) (rec DaemonSetRecord, changed bool, err error) {
	if err := mustGetJSON(t.tx, bucketDaemonSets, key, &rec); err != nil {
		return rec, false, err
	}
	if rec.Source == source {
		return rec, false, nil
	}
	rec.Source = source
	return rec, true, putJSON(t.tx, bucketDaemonSets, key, rec)
}

// GetDaemonSet returns the record under key; found is false when there is
// none.
func (t *Txn) GetDaemonSet(key string) (rec DaemonSetRecord, found bool, err error) {
	found, err = getJSON(t.tx, bucketDaemonSets, key, &rec)
	return rec, found, err
}

// ListDaemonSets is Store.ListDaemonSets within the transaction.
func (t *Txn) ListDaemonSets() ([]DaemonSetRecord, error) {
	return listJSON[DaemonSetRecord](t.tx, bucketDaemonSets)
}

// MarkDaemonSetDeleted records that the daemonset is being deleted; the
// caller removes it with DeleteDaemonSet once its instances are dealt with.
// A second mark keeps the first time.
func (s *Store) MarkDaemonSetDeleted(key string, now time.Time) (DaemonSetRecord, error) {
	var rec DaemonSetRecord
	err := s.update(func(tx *boltTx) error {
		var changed bool
		var err error
		if rec, changed, err = (&Txn{tx: tx}).MarkDaemonSetDeleted(key, now); err == nil && !changed {
			err = errNoWrite
		}
		return err
	})
	return rec, s.wrap(err, "mark daemonset %s deleted", key)
}

// MarkDaemonSetDeleted is Store.MarkDaemonSetDeleted within the
// transaction; changed is false when it was marked already.
func (t *Txn) MarkDaemonSetDeleted(key string, now time.Time) (rec DaemonSetRecord, changed bool, err error) {
	if err := mustGetJSON(t.tx, bucketDaemonSets, key, &rec); err != nil {
		return rec, false, err
	}
	if rec.DeletedAt != nil {
		return rec, false, nil
	}
	rec.DeletedAt, rec.UpdatedAt = &now, now
	return rec, true, putJSON(t.tx, bucketDaemonSets, key, rec)
}

// DeleteDaemonSet removes the daemonset's record, its revision history and
// its rollout state in one transaction. Deleting an absent daemonset is not
// an error.
func (s *Store) DeleteDaemonSet(key string) error {
	err := s.update(func(tx *boltTx) error { return (&Txn{tx: tx}).DeleteDaemonSet(key) })
	return s.wrap(err, "delete daemonset %s", key)
}

// RollBack records an automatic rollback: the daemonset's template becomes
// tmpl (the template of revision hash, which must exist), hash becomes
// current, the generation grows as for any spec change, and rejected
// records the revision abandoned.
func (t *Txn) RollBack(key string, tmpl schema.PodTemplateSpec, hash string, rejected RejectedRevision, now time.Time) (rec DaemonSetRecord, err error) {
	if err := mustGetJSON(t.tx, bucketDaemonSets, key, &rec); err != nil {
		return rec, err
	}
	if _, err := getRevision(t.tx, key, hash); err != nil {
		return rec, err
	}
	specChanged, err := jsonDiffers(rec.DaemonSet.Spec.Template, tmpl)
	if err != nil {
		return rec, err
	}
	if specChanged {
		rec.Generation++
	}
	rec.DaemonSet.Spec.Template = tmpl
	rec.CurrentRevision, rec.UpdatedAt, rec.Rejected = hash, now, &rejected
	return rec, putJSON(t.tx, bucketDaemonSets, key, rec)
}

// SetRejected sets or (nil) clears the daemonset's rejected revision;
// changed is false when it was so already.
func (t *Txn) SetRejected(key string, rejected *RejectedRevision) (rec DaemonSetRecord, changed bool, err error) {
	if err := mustGetJSON(t.tx, bucketDaemonSets, key, &rec); err != nil {
		return rec, false, err
	}
	if rec.Rejected == nil && rejected == nil {
		return rec, false, nil
	}
	rec.Rejected = rejected
	return rec, true, putJSON(t.tx, bucketDaemonSets, key, rec)
}

// DeleteDaemonSet is Store.DeleteDaemonSet within the transaction.
func (t *Txn) DeleteDaemonSet(key string) error {
	if err := deleteKey(t.tx, bucketDaemonSets, key); err != nil {
		return err
	}
	if err := deleteRevisions(t.tx, key); err != nil {
		return err
	}
	return deleteRollout(t.tx, key)
}
