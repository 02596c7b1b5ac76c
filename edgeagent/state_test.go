package edgeagent

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

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
			s, err := openBoltStore(dir)
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
	s, err := openBoltStore(dir)
	require.NoError(t, err)
	r := stateRevision("a/x", "img:1")
	require.NoError(t, s.saveDesired(schema.DesiredState{SchemaVersion: 1, Node: "n", Generation: 7, Instances: []schema.DesiredInstance{{DaemonSet: "a/x", Revision: r.Hash}}}))
	require.NoError(t, s.saveRevision(r))
	require.NoError(t, s.close())

	s, err = openBoltStore(dir)
	require.NoError(t, err)
	defer s.close()
	st, err := s.load()
	require.NoError(t, err)
	assert.Equal(t, uint64(7), st.desired.Generation)
	assert.Contains(t, st.revisions, r.Hash)
}

func TestBoltStoreErrorsNameThePath(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, StateFile), []byte("not a bolt file at all, definitely"), 0o600))
	_, err := openBoltStore(dir)
	require.Error(t, err)
	assert.Contains(t, err.Error(), filepath.Join(dir, StateFile))
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
	assert.Equal(t, map[string]bool{bad.Hash: true}, a.missing, "a corrupt revision is fetched again")
}
