package edgeagent

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"

	"github.com/edgeset/edgeset/schema"
)

func stateRevision(ds, image string) schema.Revision {
	t := schema.PodTemplateSpec{Spec: schema.PodSpec{Containers: []schema.Container{{Name: "main", Image: image}}}}
	return schema.Revision{SchemaVersion: schema.WireVersion, Hash: schema.TemplateHash(t), DaemonSet: ds, Number: 1, Template: t}
}

func testStores(t *testing.T) map[string]func() stateStore {
	dir := t.TempDir()
	return map[string]func() stateStore{
		"bolt": func() stateStore {
			s, _, err := openBoltStore(dir)
			require.NoError(t, err)
			return s
		},
		"memory": func() stateStore { return newMemoryStore() },
	}
}

func TestStateStoreRoundTrip(t *testing.T) {
	for name, open := range testStores(t) {
		t.Run(name, func(t *testing.T) {
			s := open()
			r1, r2 := stateRevision("a/x", "img:1"), stateRevision("a/x", "img:2")
			require.NoError(t, s.saveDesired(schema.DesiredState{SchemaVersion: 1, Node: "n", Generation: 3, Instances: []schema.DesiredInstance{{DaemonSet: "a/x", Revision: r1.Hash}}}))
			require.NoError(t, s.saveRevision(r1))
			require.NoError(t, s.saveApplied(3))

			// A new desired state drops the revisions it no longer references.
			require.NoError(t, s.saveDesired(schema.DesiredState{SchemaVersion: 1, Node: "n", Generation: 4, Instances: []schema.DesiredInstance{{DaemonSet: "a/x", Revision: r2.Hash}}}))
			require.NoError(t, s.saveRevision(r2))
			st, err := s.load()
			require.NoError(t, err)
			require.NotNil(t, st.desired)
			assert.Equal(t, uint64(4), st.desired.Generation)
			assert.Equal(t, uint64(3), st.applied)
			assert.Equal(t, map[string]schema.Revision{r2.Hash: r2}, st.revisions)
			require.NoError(t, s.close())
		})
	}
}

func TestBoltStoreSurvivesReopen(t *testing.T) {
	dir := t.TempDir()
	s, _, err := openBoltStore(dir)
	require.NoError(t, err)
	r := stateRevision("a/x", "img:1")
	require.NoError(t, s.saveDesired(schema.DesiredState{SchemaVersion: 1, Node: "n", Generation: 7, Instances: []schema.DesiredInstance{{DaemonSet: "a/x", Revision: r.Hash}}}))
	require.NoError(t, s.saveRevision(r))
	require.NoError(t, s.close())

	s, _, err = openBoltStore(dir)
	require.NoError(t, err)
	defer s.close()
	st, err := s.load()
	require.NoError(t, err)
	assert.Equal(t, uint64(7), st.desired.Generation)
	assert.Contains(t, st.revisions, r.Hash)
}

func TestBoltStoreErrorsNameThePath(t *testing.T) {
	notADir := filepath.Join(t.TempDir(), "file")
	require.NoError(t, os.WriteFile(notADir, nil, 0o600))
	_, _, err := openBoltStore(notADir)
	require.Error(t, err)
	assert.Contains(t, err.Error(), filepath.Join(notADir, StateFile))
}

// TestDamagedStateIsSetAside: a state file that cannot be read, as a
// database or in its content, does not keep the agent from starting. It is
// moved aside unchanged, logged as an error, and the agent starts as if
// never told anything (which removes nothing) until the controller speaks.
func TestDamagedStateIsSetAside(t *testing.T) {
	badContent := func(t *testing.T, path string) {
		db, err := bolt.Open(path, 0o600, nil)
		require.NoError(t, err)
		require.NoError(t, db.Update(func(tx *bolt.Tx) error {
			meta, err := tx.CreateBucketIfNotExists(bucketMeta)
			if err != nil {
				return err
			}
			return meta.Put(keyDesired, []byte("{not json"))
		}))
		require.NoError(t, db.Close())
	}
	writeBytes := func(b []byte) func(*testing.T, string) {
		return func(t *testing.T, path string) { require.NoError(t, os.WriteFile(path, b, 0o600)) }
	}
	cases := []struct {
		name  string
		write func(t *testing.T, path string)
		log   string
		// unchanged: the file kept is byte for byte the damaged one (a
		// readable database has had its buckets ensured before loading).
		unchanged bool
	}{
		{"not a database", writeBytes([]byte("not a bolt file at all, definitely")), "was damaged", true},
		{"zero pages", writeBytes(make([]byte, 64<<10)), "was damaged", true},
		{"unreadable desired state", badContent, "held unreadable state", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, StateFile)
			tc.write(t, path)
			before, err := os.ReadFile(path)
			require.NoError(t, err)
			var logs strings.Builder
			log := slog.New(slog.NewTextHandler(&logs, nil))

			a, err := New(Config{NodeName: "n", DataDir: dir, Logger: log}, nil, nil)
			require.NoError(t, err)
			assert.Nil(t, a.desired, "no desired state")
			require.NoError(t, a.store.close())

			aside, err := filepath.Glob(path + ".damaged-*")
			require.NoError(t, err)
			require.Len(t, aside, 1, "the damaged file is kept")
			if tc.unchanged {
				kept, err := os.ReadFile(aside[0])
				require.NoError(t, err)
				assert.Equal(t, before, kept, "moved aside unchanged")
			} else {
				db, err := bolt.Open(aside[0], 0o600, &bolt.Options{ReadOnly: true})
				require.NoError(t, err)
				require.NoError(t, db.View(func(tx *bolt.Tx) error {
					assert.Equal(t, "{not json", string(tx.Bucket(bucketMeta).Get(keyDesired)), "the unreadable state is kept")
					return nil
				}))
				require.NoError(t, db.Close())
			}
			assert.Contains(t, logs.String(), "level=ERROR")
			assert.Contains(t, logs.String(), tc.log)
			assert.Contains(t, logs.String(), aside[0])

			// The new file is a readable, empty state.
			s, setAside, err := openBoltStore(dir)
			require.NoError(t, err)
			assert.Empty(t, setAside)
			st, err := s.load()
			require.NoError(t, err)
			assert.Nil(t, st.desired)
			require.NoError(t, s.close())
		})
	}
}

func TestNewRequiresNodeAndDataDir(t *testing.T) {
	_, err := New(Config{DataDir: t.TempDir()}, nil, nil)
	assert.ErrorContains(t, err, "NodeName")
	_, err = New(Config{NodeName: "n"}, nil, nil)
	assert.ErrorIs(t, err, errNoDataDir)
	a, err := New(Config{NodeName: "n", Ephemeral: true}, nil, nil)
	require.NoError(t, err)
	assert.Equal(t, DefaultBackoff, a.cfg.RestartBackoff)
}

func TestRestoreDropsCorruptRevisions(t *testing.T) {
	good, bad := stateRevision("a/x", "img:1"), stateRevision("a/y", "img:2")
	bad.Template.Spec.Containers[0].Image = "tampered:1"
	ds := schema.DesiredState{SchemaVersion: 1, Node: "n", Generation: 2, Instances: []schema.DesiredInstance{
		{DaemonSet: "a/x", Revision: good.Hash}, {DaemonSet: "a/y", Revision: bad.Hash},
	}}
	a, err := New(Config{NodeName: "n", Ephemeral: true}, nil, nil)
	require.NoError(t, err)
	a.restore(localState{desired: &ds, revisions: map[string]schema.Revision{good.Hash: good, bad.Hash: bad}})
	assert.Contains(t, a.revisions, good.Hash)
	assert.NotContains(t, a.revisions, bad.Hash)
	assert.Equal(t, map[string]bool{schema.RevisionTopic(bad.Hash): true}, a.missing, "a corrupt revision is fetched again")
}
