package store

import (
	"fmt"
	"testing"

	"github.com/edgeset/edgeset/schema"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func testInstances(hash string) []schema.DesiredInstance {
	return []schema.DesiredInstance{{DaemonSet: "default/a", Revision: hash}}
}

func TestPutDesiredGenerations(t *testing.T) {
	cases := []struct {
		name    string
		gens    []uint64 // requested, 0 = assign
		want    []uint64
		wantErr int // index of the put that must fail with ErrStaleGeneration, -1 none
	}{
		{"assigned from one", []uint64{0, 0, 0}, []uint64{1, 2, 3}, -1},
		{"explicit jumps ahead", []uint64{0, 10, 0}, []uint64{1, 10, 11}, -1},
		{"equal refused", []uint64{0, 1}, []uint64{1}, 1},
		{"lower refused", []uint64{5, 3}, []uint64{5}, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, _ := openTemp(t, Options{})
			var got []uint64
			for i, g := range tc.gens {
				rec, err := s.PutDesired("n1", DesiredRecord{Generation: g, Instances: testInstances("h1"), PublishedAt: t0})
				if i == tc.wantErr {
					require.ErrorIs(t, err, ErrStaleGeneration)
					continue
				}
				require.NoError(t, err)
				assert.Equal(t, "n1", rec.Node)
				got = append(got, rec.Generation)
			}
			assert.Equal(t, tc.want, got)
			stored, err := s.GetDesired("n1")
			require.NoError(t, err)
			assert.Equal(t, tc.want[len(tc.want)-1], stored.Generation, "a refused put changed nothing")
		})
	}
}

func TestDesiredGenerationMonotonicAcrossDeleteAndReopen(t *testing.T) {
	s, path := openTemp(t, Options{})
	for range 3 {
		_, err := s.PutDesired("n1", DesiredRecord{Instances: testInstances("h1")})
		require.NoError(t, err)
	}
	require.NoError(t, s.DeleteDesired("n1"))
	require.NoError(t, s.DeleteDesired("n1"))
	_, err := s.GetDesired("n1")
	require.ErrorIs(t, err, ErrNotFound)
	next, err := s.NextGeneration("n1")
	require.NoError(t, err)
	assert.Equal(t, uint64(4), next)

	rec, err := s.PutDesired("n1", DesiredRecord{Instances: testInstances("h2")})
	require.NoError(t, err)
	assert.Equal(t, uint64(4), rec.Generation)
	_, err = s.PutDesired("n1", DesiredRecord{Generation: 2})
	require.ErrorIs(t, err, ErrStaleGeneration)

	require.NoError(t, s.Close())
	s, err = Open(path, Options{})
	require.NoError(t, err)
	defer s.Close()
	got, err := s.GetDesired("n1")
	require.NoError(t, err)
	assert.Equal(t, rec.Generation, got.Generation)
	assert.Equal(t, testInstances("h2"), got.Instances)
	rec, err = s.PutDesired("n1", DesiredRecord{})
	require.NoError(t, err)
	assert.Equal(t, uint64(5), rec.Generation)
	next, err = s.NextGeneration("never-seen")
	require.NoError(t, err)
	assert.Equal(t, uint64(1), next)
}

func TestPutDesiredBatch(t *testing.T) {
	s, _ := openTemp(t, Options{})
	_, err := s.PutDesired("n000", DesiredRecord{Generation: 41})
	require.NoError(t, err)

	recs := map[string]DesiredRecord{}
	for i := range 500 {
		recs[fmt.Sprintf("n%03d", i)] = DesiredRecord{Instances: testInstances("h1"), PublishedAt: t0}
	}
	gens, err := s.PutDesiredBatch(recs)
	require.NoError(t, err)
	assert.Len(t, gens, 500)
	assert.Equal(t, uint64(42), gens["n000"])
	assert.Equal(t, uint64(1), gens["n499"])

	list, err := s.ListDesired()
	require.NoError(t, err)
	require.Len(t, list, 500)
	assert.Equal(t, "n000", list[0].Node)
	assert.Equal(t, uint64(42), list[0].Generation)

	// One stale entry fails the whole batch.
	_, err = s.PutDesiredBatch(map[string]DesiredRecord{"n001": {}, "n002": {Generation: 1}})
	require.ErrorIs(t, err, ErrStaleGeneration)
	got, err := s.GetDesired("n001")
	require.NoError(t, err)
	assert.Equal(t, uint64(1), got.Generation, "failed batch wrote n001")
}

func TestDesiredWire(t *testing.T) {
	empty := DesiredRecord{Node: "n1", Generation: 3}.Wire()
	assert.Equal(t, schema.DesiredState{SchemaVersion: schema.WireVersion, Node: "n1", Generation: 3,
		Instances: []schema.DesiredInstance{}}, empty)
}
