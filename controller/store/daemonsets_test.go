package store

import (
	"testing"
	"time"

	"github.com/edgeset/edgeset/schema"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.etcd.io/bbolt"
)

func TestPutDaemonSet(t *testing.T) {
	withLabel := func(ds *schema.DaemonSet) *schema.DaemonSet {
		ds.Metadata.Labels = map[string]string{"team": "edge"}
		return ds
	}
	withNamespace := func(ds *schema.DaemonSet) *schema.DaemonSet {
		ds.Metadata.Namespace = schema.DefaultNamespace
		return ds
	}
	cases := []struct {
		name        string
		apply       []*schema.DaemonSet
		wantChanged bool
		wantGen     int64
		wantImage   string
	}{
		{"create", []*schema.DaemonSet{testDaemonSet("a", "img:1")}, true, 1, "img:1"},
		{"unchanged reapply", []*schema.DaemonSet{testDaemonSet("a", "img:1"), testDaemonSet("a", "img:1")}, false, 1, "img:1"},
		{"explicit default namespace is unchanged", []*schema.DaemonSet{testDaemonSet("a", "img:1"), withNamespace(testDaemonSet("a", "img:1"))}, false, 1, "img:1"},
		{"spec change", []*schema.DaemonSet{testDaemonSet("a", "img:1"), testDaemonSet("a", "img:2")}, true, 2, "img:2"},
		{"two spec changes", []*schema.DaemonSet{testDaemonSet("a", "img:1"), testDaemonSet("a", "img:2"), testDaemonSet("a", "img:3")}, true, 3, "img:3"},
		{"metadata change keeps generation", []*schema.DaemonSet{testDaemonSet("a", "img:1"), withLabel(testDaemonSet("a", "img:1"))}, true, 1, "img:1"},
		{"revert is a change", []*schema.DaemonSet{testDaemonSet("a", "img:1"), testDaemonSet("a", "img:2"), testDaemonSet("a", "img:1")}, true, 3, "img:1"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, _ := openTemp(t, Options{})
			var (
				rec     DaemonSetRecord
				changed bool
				err     error
			)
			for i, ds := range tc.apply {
				rec, changed, err = s.PutDaemonSet(ds, t0.Add(time.Duration(i)*time.Minute))
				require.NoError(t, err)
			}
			assert.Equal(t, tc.wantChanged, changed)
			assert.Equal(t, tc.wantGen, rec.Generation)
			assert.Equal(t, tc.wantImage, rec.DaemonSet.Spec.Template.Spec.Containers[0].Image)
			assert.Equal(t, schema.DefaultNamespace, rec.DaemonSet.Metadata.Namespace)
			assert.True(t, rec.CreatedAt.Equal(t0), "createdAt %s", rec.CreatedAt)

			got, err := s.GetDaemonSet("default/a")
			require.NoError(t, err)
			assert.Equal(t, rec.Generation, got.Generation)
			assert.True(t, rec.UpdatedAt.Equal(got.UpdatedAt))
		})
	}
}

func TestPutDaemonSetUnchangedWritesNothing(t *testing.T) {
	s, _ := openTemp(t, Options{})
	first, _, err := s.PutDaemonSet(testDaemonSet("a", "img:1"), t0)
	require.NoError(t, err)
	rev, _, err := s.EnsureRevision("default/a", testTemplate("a", "img:1"), "", t0)
	require.NoError(t, err)
	_, err = s.SetCurrentRevision("default/a", rev.Hash, t0)
	require.NoError(t, err)
	before := lastTxID(t, s)

	again, changed, err := s.PutDaemonSet(testDaemonSet("a", "img:1"), t0.Add(time.Hour))
	require.NoError(t, err)
	assert.False(t, changed)
	assert.True(t, again.UpdatedAt.Equal(first.UpdatedAt), "updatedAt moved on a no-op")
	_, created, err := s.EnsureRevision("default/a", testTemplate("a", "img:1"), "", t0)
	require.NoError(t, err)
	assert.False(t, created)
	_, err = s.SetCurrentRevision("default/a", rev.Hash, t0.Add(time.Hour))
	require.NoError(t, err)
	_, err = s.PruneRevisions("default/a", 0, nil)
	require.NoError(t, err)
	assert.Equal(t, before, lastTxID(t, s), "a no-op committed a transaction")
}

// lastTxID returns the id of the last committed transaction.
func lastTxID(t *testing.T, s *Store) int {
	t.Helper()
	var id int
	require.NoError(t, s.db.View(func(tx *bbolt.Tx) error {
		id = tx.ID()
		return nil
	}))
	return id
}

func TestPutDaemonSetDoesNotModifyArgument(t *testing.T) {
	s, _ := openTemp(t, Options{})
	ds := testDaemonSet("a", "img:1")
	_, _, err := s.PutDaemonSet(ds, t0)
	require.NoError(t, err)
	assert.Empty(t, ds.Metadata.Namespace)
}

func TestPutDaemonSetRejectsEmptyName(t *testing.T) {
	s, _ := openTemp(t, Options{})
	_, _, err := s.PutDaemonSet(testDaemonSet("", "img:1"), t0)
	assert.ErrorContains(t, err, "metadata.name")
}

func TestDaemonSetLifecycle(t *testing.T) {
	s, _ := openTemp(t, Options{})
	for _, name := range []string{"b", "a"} {
		_, _, err := s.PutDaemonSet(testDaemonSet(name, "img:1"), t0)
		require.NoError(t, err)
	}
	list, err := s.ListDaemonSets()
	require.NoError(t, err)
	require.Len(t, list, 2)
	assert.Equal(t, []string{"default/a", "default/b"}, []string{list[0].Key(), list[1].Key()})

	// Current revision must exist.
	_, err = s.SetCurrentRevision("default/a", "0123456789abcdef0123", t0)
	require.ErrorIs(t, err, ErrNotFound)
	rev, _, err := s.EnsureRevision("default/a", testTemplate("a", "img:1"), "", t0)
	require.NoError(t, err)
	rec, err := s.SetCurrentRevision("default/a", rev.Hash, t0.Add(time.Minute))
	require.NoError(t, err)
	assert.Equal(t, rev.Hash, rec.CurrentRevision)

	// Mark deleted keeps the first time; re-applying clears it.
	marked, err := s.MarkDaemonSetDeleted("default/a", t0.Add(2*time.Minute))
	require.NoError(t, err)
	again, err := s.MarkDaemonSetDeleted("default/a", t0.Add(3*time.Minute))
	require.NoError(t, err)
	require.NotNil(t, again.DeletedAt)
	assert.True(t, again.DeletedAt.Equal(*marked.DeletedAt))
	revived, changed, err := s.PutDaemonSet(testDaemonSet("a", "img:1"), t0.Add(4*time.Minute))
	require.NoError(t, err)
	assert.True(t, changed)
	assert.Nil(t, revived.DeletedAt)
	assert.Equal(t, int64(1), revived.Generation)
	assert.Equal(t, rev.Hash, revived.CurrentRevision)

	// Delete removes record, revisions and rollout state; twice is fine.
	require.NoError(t, s.PutRolloutParts("default/a", map[string]int{"batch": 1}, []RolloutEntry{{Node: "n1", Value: 1}}, true))
	require.NoError(t, s.DeleteDaemonSet("default/a"))
	require.NoError(t, s.DeleteDaemonSet("default/a"))
	_, err = s.GetDaemonSet("default/a")
	require.ErrorIs(t, err, ErrNotFound)
	revs, err := s.ListRevisions("default/a")
	require.NoError(t, err)
	assert.Empty(t, revs)
	found, err := s.GetRolloutParts("default/a", new(map[string]int), func(string, []byte) error { return nil })
	require.NoError(t, err)
	assert.False(t, found)
	_, err = s.GetDaemonSet("default/b")
	require.NoError(t, err, "other daemonset untouched")

	_, err = s.MarkDaemonSetDeleted("default/a", t0)
	require.ErrorIs(t, err, ErrNotFound)
}

func TestSetDaemonSetSource(t *testing.T) {
	s, _ := openTemp(t, Options{})
	_, err := s.SetDaemonSetSource("default/a", "file:x.yaml")
	require.ErrorIs(t, err, ErrNotFound)

	first, _, err := s.PutDaemonSet(testDaemonSet("a", "img:1"), t0)
	require.NoError(t, err)
	assert.Empty(t, first.Source)
	rec, err := s.SetDaemonSetSource("default/a", "file:x.yaml")
	require.NoError(t, err)
	assert.Equal(t, "file:x.yaml", rec.Source)
	assert.True(t, rec.UpdatedAt.Equal(first.UpdatedAt), "the source is bookkeeping")

	before := lastTxID(t, s)
	_, err = s.SetDaemonSetSource("default/a", "file:x.yaml")
	require.NoError(t, err)
	assert.Equal(t, before, lastTxID(t, s), "setting the same source committed a transaction")

	rec, _, err = s.PutDaemonSet(testDaemonSet("a", "img:2"), t0.Add(time.Minute))
	require.NoError(t, err)
	assert.Equal(t, "file:x.yaml", rec.Source, "PutDaemonSet keeps the source")
	got, err := s.GetDaemonSet("default/a")
	require.NoError(t, err)
	assert.Equal(t, "file:x.yaml", got.Source)
}
