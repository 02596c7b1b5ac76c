package store

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRollBackRecordsTemplateAndRejection: a rollback makes the template
// of the revision rolled back to the daemonset's own, with the rejected
// revision, and the whole record survives a reopen.
func TestRollBackRecordsTemplateAndRejection(t *testing.T) {
	s, path := openTemp(t, Options{})
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	good, bad := testDaemonSet("a", "img:1"), testDaemonSet("a", "img:2")
	var goodRev, badRev Revision
	require.NoError(t, s.Update(false, func(tx *Txn) (err error) {
		if _, _, err = tx.PutDaemonSet(good, now); err != nil {
			return err
		}
		if goodRev, _, err = tx.EnsureRevision("default/a", good.Spec.Template, "", now); err != nil {
			return err
		}
		if _, _, err = tx.PutDaemonSet(bad, now); err != nil {
			return err
		}
		if badRev, _, err = tx.EnsureRevision("default/a", bad.Spec.Template, "", now); err != nil {
			return err
		}
		_, _, err = tx.SetCurrentRevision("default/a", badRev.Hash, now)
		return err
	}))
	rejected := RejectedRevision{Hash: badRev.Hash, Number: badRev.Number, Reason: "1 of 1 failed", Time: now}
	require.NoError(t, s.Update(false, func(tx *Txn) error {
		rec, err := tx.RollBack("default/a", goodRev.Template, goodRev.Hash, rejected, now)
		assert.Equal(t, int64(3), rec.Generation, "a rollback changes the spec")
		return err
	}))
	require.NoError(t, s.Close())
	s, err := Open(path, Options{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	rec, err := s.GetDaemonSet("default/a")
	require.NoError(t, err)
	assert.Equal(t, "img:1", rec.DaemonSet.Spec.Template.Spec.Containers[0].Image)
	assert.Equal(t, goodRev.Hash, rec.CurrentRevision)
	require.NotNil(t, rec.Rejected)
	assert.Equal(t, rejected, *rec.Rejected)

	require.NoError(t, s.Update(false, func(tx *Txn) error {
		_, changed, err := tx.SetRejected("default/a", nil)
		assert.True(t, changed)
		return err
	}))
	rec, err = s.GetDaemonSet("default/a")
	require.NoError(t, err)
	assert.Nil(t, rec.Rejected)

	err = s.Update(false, func(tx *Txn) error {
		_, err := tx.RollBack("default/a", goodRev.Template, "nope", rejected, now)
		return err
	})
	assert.ErrorIs(t, err, ErrNotFound, "the revision rolled back to must exist")
}
