package store

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.etcd.io/bbolt"
)

// testHead and testEntry stand in for the rollout package's encodings.
type testHead struct {
	Target string            `json:"target"`
	Failed map[string]string `json:"failed,omitempty"` // a whole record's map, before schema 3
}

type testEntry struct {
	Why string `json:"why"`
}

// entryList is m as PutRolloutParts takes it, in map order.
func entryList(m map[string]any) []RolloutEntry {
	out := make([]RolloutEntry, 0, len(m))
	for node, v := range m {
		out = append(out, RolloutEntry{Node: node, Value: v})
	}
	return out
}

// readParts reads key's rollout parts: the head and the entries by node.
func readParts(t *testing.T, s *Store, key string) (testHead, map[string]string, bool) {
	t.Helper()
	var head testHead
	entries := map[string]string{}
	found, err := s.GetRolloutParts(key, &head, func(node string, raw []byte) error {
		var e testEntry
		if err := json.Unmarshal(raw, &e); err != nil {
			return err
		}
		entries[node] = e.Why
		return nil
	})
	require.NoError(t, err)
	return head, entries, found
}

func TestRolloutPartsRoundTripAndPartialUpdate(t *testing.T) {
	s, _ := openTemp(t, Options{})
	_, _, found := readParts(t, s, "default/a")
	assert.False(t, found)

	require.NoError(t, s.PutRolloutParts("default/a", testHead{Target: "v1"},
		entryList(map[string]any{"n1": testEntry{"one"}, "n2": testEntry{"two"}, "n3": testEntry{"three"}}), true))
	require.NoError(t, s.PutRolloutParts("default/b", testHead{Target: "w1"}, entryList(map[string]any{"n1": testEntry{"other"}}), true))
	head, entries, found := readParts(t, s, "default/a")
	require.True(t, found)
	assert.Equal(t, testHead{Target: "v1"}, head)
	assert.Equal(t, map[string]string{"n1": "one", "n2": "two", "n3": "three"}, entries)

	// A partial write changes, adds and deletes the entries named only.
	require.NoError(t, s.PutRolloutParts("default/a", testHead{Target: "v2"},
		entryList(map[string]any{"n2": testEntry{"TWO"}, "n3": nil, "n4": testEntry{"four"}, "absent": nil}), false))
	head, entries, _ = readParts(t, s, "default/a")
	assert.Equal(t, testHead{Target: "v2"}, head)
	assert.Equal(t, map[string]string{"n1": "one", "n2": "TWO", "n4": "four"}, entries)

	// A head alone keeps the entries; a replace drops the others.
	require.NoError(t, s.PutRolloutParts("default/a", testHead{Target: "v3"}, nil, false))
	_, entries, _ = readParts(t, s, "default/a")
	assert.Len(t, entries, 3)
	require.NoError(t, s.PutRolloutParts("default/a", testHead{Target: "v4"}, entryList(map[string]any{"n9": testEntry{"nine"}}), true))
	head, entries, _ = readParts(t, s, "default/a")
	assert.Equal(t, testHead{Target: "v4"}, head)
	assert.Equal(t, map[string]string{"n9": "nine"}, entries)
	require.NoError(t, s.PutRolloutParts("default/a", testHead{Target: "v5"}, nil, true))
	_, entries, _ = readParts(t, s, "default/a")
	assert.Empty(t, entries)

	head, entries, _ = readParts(t, s, "default/b")
	assert.Equal(t, testHead{Target: "w1"}, head, "other daemonset untouched")
	assert.Equal(t, map[string]string{"n1": "other"}, entries)
}

func TestRolloutPartsErrorsNameWhat(t *testing.T) {
	s, _ := openTemp(t, Options{})
	require.ErrorContains(t, s.PutRolloutParts("default/b", func() {}, nil, true), "default/b")
	err := s.PutRolloutParts("default/b", testHead{}, entryList(map[string]any{"n1": func() {}}), true)
	require.ErrorContains(t, err, "rolloutnodes/default/b/n1")
	_, _, found := readParts(t, s, "default/b")
	assert.False(t, found, "a failed write keeps nothing, not even the head")

	require.NoError(t, s.PutRolloutParts("default/b", testHead{}, entryList(map[string]any{"n1": testEntry{"x"}}), true))
	boom := errors.New("boom")
	_, err = s.GetRolloutParts("default/b", &testHead{}, func(string, []byte) error { return boom })
	require.ErrorIs(t, err, boom)
	assert.ErrorContains(t, err, "rolloutnodes/default/b/n1")
}

func TestDeleteRolloutDropsEntries(t *testing.T) {
	s, _ := openTemp(t, Options{})
	for _, del := range []struct {
		name string
		fn   func(key string) error
	}{
		{"DeleteRollout", s.DeleteRollout},
		{"DeleteDaemonSet", s.DeleteDaemonSet},
	} {
		t.Run(del.name, func(t *testing.T) {
			require.NoError(t, s.PutRolloutParts("default/a", testHead{Target: "v1"}, entryList(map[string]any{"n1": testEntry{"one"}}), true))
			require.NoError(t, del.fn("default/a"))
			require.NoError(t, del.fn("default/a"), "twice is fine")
			_, _, found := readParts(t, s, "default/a")
			assert.False(t, found)
			// A new rollout under the key starts with no entries.
			require.NoError(t, s.PutRolloutParts("default/a", testHead{Target: "v2"}, nil, false))
			_, entries, found := readParts(t, s, "default/a")
			assert.True(t, found)
			assert.Empty(t, entries)
			require.NoError(t, s.DeleteRollout("default/a"))
		})
	}
}

// TestRolloutPartsOneTransaction: within an Update, the head and the
// entries land together with the request's other writes, or none of
// them does, whether the request fails or the disk refuses the commit.
func TestRolloutPartsOneTransaction(t *testing.T) {
	s, _ := openTempUnmirrored(t, Options{})
	require.NoError(t, s.PutRolloutParts("default/a", testHead{Target: "v1"},
		entryList(map[string]any{"n1": testEntry{"one"}, "n2": testEntry{"two"}}), true))
	write := func(replace bool) func(tx *Txn) error {
		return func(tx *Txn) error {
			if err := tx.PutRolloutParts("default/a", testHead{Target: "v2"},
				entryList(map[string]any{"n1": nil, "n3": testEntry{"three"}}), replace); err != nil {
				return err
			}
			_, err := tx.PutDesiredBatch(map[string]DesiredRecord{"n3": {Node: "n3"}})
			return err
		}
	}
	unchanged := func(what string) {
		t.Helper()
		head, entries, _ := readParts(t, s, "default/a")
		assert.Equal(t, testHead{Target: "v1"}, head, what)
		assert.Equal(t, map[string]string{"n1": "one", "n2": "two"}, entries, what)
		_, err := s.GetDesired("n3")
		assert.ErrorIs(t, err, ErrNotFound, what)
	}
	boom := errors.New("boom")
	for _, replace := range []bool{false, true} {
		err := s.Update(false, func(tx *Txn) error {
			if err := write(replace)(tx); err != nil {
				return err
			}
			return boom
		})
		require.ErrorIs(t, err, boom)
		unchanged("a failed request keeps nothing")

		diskFull := errors.New("no space left on device")
		s.FailWrites(func() error { return diskFull })
		require.ErrorIs(t, s.Update(false, write(replace)), diskFull)
		s.FailWrites(nil)
		unchanged("a refused commit keeps nothing")
	}
	require.NoError(t, s.Update(false, write(false)))
	head, entries, _ := readParts(t, s, "default/a")
	assert.Equal(t, testHead{Target: "v2"}, head)
	assert.Equal(t, map[string]string{"n2": "two", "n3": "three"}, entries)
}

// TestRolloutOldRecordLoads: a schema-2 store's rollout record (the whole
// state in the head) loads as it is after the migration to schema 3, and
// its first replace leaves only what it writes.
func TestRolloutOldRecordLoads(t *testing.T) {
	s, path := openTemp(t, Options{})
	require.NoError(t, s.db.Update(func(tx *bbolt.Tx) error {
		if err := tx.DeleteBucket(bucketRolloutNodes); err != nil {
			return err
		}
		old := []byte(`{"target":"v1","failed":{"n1":"crashed","n2":"refused"}}`)
		if err := tx.Bucket(bucketRollouts).Put([]byte("default/a"), old); err != nil {
			return err
		}
		return tx.Bucket(bucketMeta).Put(keySchemaVersion, u64Key(2))
	}))
	require.NoError(t, s.Close())

	ro, err := OpenReadOnly(path, Options{})
	require.NoError(t, err)
	head, entries, found := readParts(t, ro, "default/a")
	require.NoError(t, ro.Close())
	require.True(t, found, "a read-only open of the schema-2 file reads its record")
	assert.Equal(t, testHead{Target: "v1", Failed: map[string]string{"n1": "crashed", "n2": "refused"}}, head)
	assert.Empty(t, entries)

	s, err = Open(path, Options{})
	require.NoError(t, err)
	defer s.Close()
	head, entries, found = readParts(t, s, "default/a")
	require.True(t, found)
	assert.Equal(t, testHead{Target: "v1", Failed: map[string]string{"n1": "crashed", "n2": "refused"}}, head)
	assert.Empty(t, entries)

	require.NoError(t, s.PutRolloutParts("default/a", testHead{Target: "v1"},
		entryList(map[string]any{"n1": testEntry{"crashed"}, "n2": testEntry{"refused"}}), true))
	head, entries, _ = readParts(t, s, "default/a")
	assert.Equal(t, testHead{Target: "v1"}, head, "the maps moved out of the head")
	assert.Equal(t, map[string]string{"n1": "crashed", "n2": "refused"}, entries)
}
