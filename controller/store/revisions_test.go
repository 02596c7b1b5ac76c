package store

import (
	"testing"
	"time"

	"github.com/edgeset/edgeset/schema"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestEnsureRevision(t *testing.T) {
	s, _ := openTemp(t, Options{})
	const ds = "default/a"
	type step struct {
		image       string
		wantNumber  int64
		wantCreated bool
	}
	steps := []step{
		{"img:1", 1, true},
		{"img:1", 1, false}, // same template: reused
		{"img:2", 2, true},
		{"img:1", 1, false}, // undo: reused, number unchanged
		{"img:3", 3, true},
	}
	for i, st := range steps {
		rev, created, err := s.EnsureRevision(ds, testTemplate("a", st.image), "apply "+st.image, t0.Add(time.Duration(i)*time.Minute))
		require.NoError(t, err, "step %d", i)
		assert.Equal(t, st.wantCreated, created, "step %d created", i)
		assert.Equal(t, st.wantNumber, rev.Number, "step %d number", i)
		assert.Equal(t, schema.TemplateHash(testTemplate("a", st.image)), rev.Hash)
		assert.Equal(t, ds, rev.DaemonSet)
		assert.Equal(t, "apply "+st.image, rev.ChangeCause, "a reused revision keeps its cause")
	}

	revs, err := s.ListRevisions(ds)
	require.NoError(t, err)
	require.Len(t, revs, 3)
	for i, rev := range revs {
		assert.Equal(t, int64(i+1), rev.Number)
	}
	got, err := s.GetRevision(ds, revs[1].Hash)
	require.NoError(t, err)
	assert.Equal(t, "img:2", got.Template.Spec.Containers[0].Image)
	assert.Equal(t, schema.WireVersion, got.Wire().SchemaVersion)
	assert.Equal(t, got.Hash, got.Wire().Hash)

	_, err = s.GetRevision(ds, "ffffffffffffffffffff")
	require.ErrorIs(t, err, ErrNotFound)
	_, err = s.GetRevision("default/none", revs[0].Hash)
	require.ErrorIs(t, err, ErrNotFound)
}

func TestRevisionNumbersNotReusedAfterPrune(t *testing.T) {
	s, _ := openTemp(t, Options{})
	const ds = "default/a"
	r1, _, err := s.EnsureRevision(ds, testTemplate("a", "img:1"), "", t0)
	require.NoError(t, err)
	r2, _, err := s.EnsureRevision(ds, testTemplate("a", "img:2"), "", t0)
	require.NoError(t, err)
	_, _, err = s.PutDaemonSet(testDaemonSet("a", "img:1"), t0)
	require.NoError(t, err)
	_, err = s.SetCurrentRevision(ds, r1.Hash, t0)
	require.NoError(t, err)

	pruned, err := s.PruneRevisions(ds, 0, nil)
	require.NoError(t, err)
	assert.Equal(t, []string{r2.Hash}, pruned)

	r3, created, err := s.EnsureRevision(ds, testTemplate("a", "img:3"), "", t0)
	require.NoError(t, err)
	assert.True(t, created)
	assert.Equal(t, int64(3), r3.Number, "number 2 was pruned, not freed")
}

func TestRevisionsByHashAcrossDaemonSets(t *testing.T) {
	s, _ := openTemp(t, Options{})
	shared := testTemplate("x", "img:1")
	for _, ds := range []string{"ns/b", "ns/a"} {
		_, _, err := s.EnsureRevision(ds, shared, "", t0)
		require.NoError(t, err)
	}
	_, _, err := s.EnsureRevision("ns/c", testTemplate("x", "img:2"), "", t0)
	require.NoError(t, err)

	revs, err := s.RevisionsByHash(schema.TemplateHash(shared))
	require.NoError(t, err)
	require.Len(t, revs, 2)
	assert.Equal(t, "ns/a", revs[0].DaemonSet)
	assert.Equal(t, "ns/b", revs[1].DaemonSet)

	_, err = s.RevisionsByHash("ffffffffffffffffffff")
	require.ErrorIs(t, err, ErrNotFound)
}

func TestPruneRevisions(t *testing.T) {
	// Revisions img:1..img:5 get numbers 1..5.
	images := []string{"img:1", "img:2", "img:3", "img:4", "img:5"}
	cases := []struct {
		name    string
		current string
		keep    int
		inUse   []string
		want    []string // pruned, oldest first
	}{
		{"keep all", "img:5", 10, nil, nil},
		{"keep two old", "img:5", 2, nil, []string{"img:1", "img:2"}},
		{"keep none", "img:5", 0, nil, []string{"img:1", "img:2", "img:3", "img:4"}},
		{"negative keep is none", "img:5", -1, nil, []string{"img:1", "img:2", "img:3", "img:4"}},
		{"in use survive", "img:5", 0, []string{"img:1", "img:3"}, []string{"img:2", "img:4"}},
		{"in use do not count against keep", "img:5", 1, []string{"img:4"}, []string{"img:1", "img:2"}},
		{"current after undo survives", "img:2", 0, nil, []string{"img:1", "img:3", "img:4", "img:5"}},
		{"current survives without keep", "img:1", 1, []string{"img:2"}, []string{"img:3", "img:4"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, _ := openTemp(t, Options{})
			const ds = "default/a"
			hashOf := map[string]string{}
			for _, img := range images {
				rev, _, err := s.EnsureRevision(ds, testTemplate("a", img), "", t0)
				require.NoError(t, err)
				hashOf[img] = rev.Hash
			}
			_, _, err := s.PutDaemonSet(testDaemonSet("a", tc.current), t0)
			require.NoError(t, err)
			_, err = s.SetCurrentRevision(ds, hashOf[tc.current], t0)
			require.NoError(t, err)
			inUse := map[string]bool{}
			for _, img := range tc.inUse {
				inUse[hashOf[img]] = true
			}

			pruned, err := s.PruneRevisions(ds, tc.keep, inUse)
			require.NoError(t, err)

			var want []string
			for _, img := range tc.want {
				want = append(want, hashOf[img])
			}
			assert.Equal(t, want, pruned)
			left, err := s.ListRevisions(ds)
			require.NoError(t, err)
			assert.Len(t, left, len(images)-len(tc.want))
			for _, rev := range left {
				assert.NotContains(t, want, rev.Hash)
			}
		})
	}
}

func TestPruneRevisionsUnknownDaemonSet(t *testing.T) {
	s, _ := openTemp(t, Options{})
	pruned, err := s.PruneRevisions("default/none", 0, nil)
	require.NoError(t, err)
	assert.Empty(t, pruned)
}
