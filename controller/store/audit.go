package store

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/edgeset/edgeset/controller/audit"
)

// bucketAudit holds the audit log: 8-byte big-endian sequence number ->
// audit.Entry; the bucket's sequence numbers the entries and its key
// "count" (in bucketMeta, keyAuditCount) counts them. Created by the
// first append rather than by a schema migration: a store without it
// reads as an empty log.
var (
	bucketAudit   = []byte("audit")
	keyAuditCount = []byte("auditCount")
)

// maxAuditTrim bounds the entries one append drops, so an append after a
// long pause (or a lowered retention) stays a small transaction; later
// appends drop the rest.
const maxAuditTrim = 256

// AppendAudit stores e as the newest audit entry and returns its
// sequence number; in the same transaction it drops the oldest entries
// that ret says must go at now (at most maxAuditTrim of them).
func (s *Store) AppendAudit(e audit.Entry, ret audit.Retention, now time.Time) (uint64, error) {
	var seq uint64
	err := s.update(func(tx *boltTx) error {
		b, err := tx.CreateBucketIfNotExists(bucketAudit)
		if err != nil {
			return err
		}
		meta, err := bucket(tx, bucketMeta)
		if err != nil {
			return err
		}
		if seq, err = b.NextSequence(); err != nil {
			return err
		}
		e.Seq = seq
		if err := putJSONIn(b, bucketAudit, u64Key(seq), e); err != nil {
			return err
		}
		count := auditCount(meta) + 1
		if count, err = trimAudit(b, count, ret, now); err != nil {
			return err
		}
		return meta.Put(keyAuditCount, u64Key(uint64(count)))
	})
	return seq, s.wrap(err, "append audit entry")
}

// auditCount reads the stored entry count.
func auditCount(meta *boltBucket) int {
	v := meta.Get(keyAuditCount)
	if len(v) != 8 {
		return 0
	}
	return int(binary.BigEndian.Uint64(v))
}

// trimAudit drops the oldest entries ret says must go and returns how
// many remain.
func trimAudit(b *boltBucket, count int, ret audit.Retention, now time.Time) (int, error) {
	for range maxAuditTrim {
		k, v := b.Cursor().First()
		if k == nil {
			return 0, nil
		}
		var oldest audit.Entry
		if err := json.Unmarshal(v, &oldest); err != nil {
			return count, fmt.Errorf("%w: decode %s/%x: %w", ErrCorrupt, bucketAudit, k, err)
		}
		if !ret.Drop(count, oldest.Time, now) {
			break
		}
		if err := b.Delete(slices.Clone(k)); err != nil {
			return count, err
		}
		count--
	}
	return count, nil
}

// FinishAudit records the outcome of the entry seq: its status code,
// message and duration. An entry already dropped is left alone.
func (s *Store) FinishAudit(seq uint64, status int, message string, d time.Duration) error {
	return s.updateAudit(seq, "finish", func(e *audit.Entry) {
		e.Status, e.Message, e.Duration = status, audit.Clip(message), d
	})
}

// updateAudit changes the entry seq with change, if it is still kept.
func (s *Store) updateAudit(seq uint64, what string, change func(*audit.Entry)) error {
	err := s.update(func(tx *boltTx) error {
		b := tx.Bucket(bucketAudit)
		if b == nil {
			return errNoWrite
		}
		v := b.Get(u64Key(seq))
		if v == nil {
			return errNoWrite
		}
		var e audit.Entry
		if err := json.Unmarshal(v, &e); err != nil {
			return fmt.Errorf("%w: decode %s/%d: %w", ErrCorrupt, bucketAudit, seq, err)
		}
		change(&e)
		return putJSONIn(b, bucketAudit, u64Key(seq), e)
	})
	return s.wrap(err, "%s audit entry %d", what, seq)
}

// NoteAudit sets the detail of the entry seq (audit.Entry.Detail). An
// entry already dropped is left alone.
func (s *Store) NoteAudit(seq uint64, detail string) error {
	return s.updateAudit(seq, "note", func(e *audit.Entry) { e.Detail = audit.Clip(detail) })
}

// ListAudit returns the entries f selects, oldest first.
func (s *Store) ListAudit(f audit.Filter) ([]audit.Entry, error) {
	var out []audit.Entry
	err := s.view(func(tx *boltTx) error {
		b := tx.Bucket(bucketAudit)
		if b == nil {
			return nil
		}
		c := b.Cursor()
		for k, v := c.Seek(u64Key(f.SinceSeq + 1)); k != nil; k, v = c.Next() {
			var e audit.Entry
			if err := json.Unmarshal(v, &e); err != nil {
				return fmt.Errorf("%w: decode %s/%x: %w", ErrCorrupt, bucketAudit, k, err)
			}
			if f.Match(e) {
				out = append(out, e)
			}
		}
		return nil
	})
	if f.Limit > 0 && len(out) > f.Limit {
		out = out[len(out)-f.Limit:]
	}
	return out, s.wrap(err, "list audit entries")
}
