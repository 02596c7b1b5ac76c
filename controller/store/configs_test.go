package store

import (
	"errors"
	"testing"

	"github.com/edgeset/edgeset/schema"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.etcd.io/bbolt"
)

func testConfigMap(name string, data map[string]string) schema.ConfigMap {
	return schema.ConfigMap{
		TypeMeta: schema.TypeMeta{APIVersion: schema.APIVersionCore, Kind: schema.KindConfigMap},
		Metadata: schema.ObjectMeta{Name: name},
		Data:     data,
	}
}

func testSecret(name string, data map[string]string) schema.Secret {
	s := schema.Secret{
		TypeMeta: schema.TypeMeta{APIVersion: schema.APIVersionCore, Kind: schema.KindSecret},
		Metadata: schema.ObjectMeta{Name: name},
		Type:     schema.SecretTypeOpaque,
		Data:     map[string][]byte{},
	}
	for k, v := range data {
		s.Data[k] = []byte(v)
	}
	return s
}

func putConfigMap(t *testing.T, s *Store, c schema.ConfigMap, source string) (rec ConfigMapRecord, changed bool) {
	t.Helper()
	require.NoError(t, s.Update(false, func(tx *Txn) (err error) {
		rec, changed, err = tx.PutConfigMap(c, source, t0)
		return err
	}))
	return rec, changed
}

func TestPutConfigMap(t *testing.T) {
	s, _ := openTemp(t, Options{})
	first, changed := putConfigMap(t, s, testConfigMap("cfg", map[string]string{"a": "1"}), "")
	require.True(t, changed)
	assert.Equal(t, "default/cfg", first.Object.Key())
	assert.Equal(t, schema.DefaultNamespace, first.Object.Metadata.Namespace)
	assert.Equal(t, int64(1), first.Generation)
	assert.NotZero(t, first.ResourceVersion)
	assert.Equal(t, schema.ConfigMapHash(WireConfigMap(first.Object)), first.Hash)

	again, changed := putConfigMap(t, s, testConfigMap("cfg", map[string]string{"a": "1"}), "")
	assert.False(t, changed, "reapplying the same object")
	assert.Equal(t, first, again)

	labelled := testConfigMap("cfg", map[string]string{"a": "1"})
	labelled.Metadata.Labels = map[string]string{"team": "edge"}
	meta, changed := putConfigMap(t, s, labelled, "")
	assert.True(t, changed, "a label is a change of the object")
	assert.Equal(t, first.Hash, meta.Hash, "labels do not reach devices")
	assert.Equal(t, int64(1), meta.Generation)
	assert.Greater(t, meta.ResourceVersion, first.ResourceVersion)

	data, changed := putConfigMap(t, s, testConfigMap("cfg", map[string]string{"a": "2"}), "")
	assert.True(t, changed)
	assert.NotEqual(t, first.Hash, data.Hash)
	assert.Equal(t, int64(2), data.Generation)

	sourced, changed := putConfigMap(t, s, testConfigMap("cfg", map[string]string{"a": "2"}), "file:/m.yaml")
	assert.False(t, changed, "a new source only is bookkeeping")
	assert.Equal(t, "file:/m.yaml", sourced.Source)
	assert.Equal(t, data.ResourceVersion, sourced.ResourceVersion)

	got, err := s.GetConfigMap("default/cfg")
	require.NoError(t, err)
	assert.Equal(t, sourced, got)
	_, err = s.GetConfigMap("default/other")
	assert.ErrorIs(t, err, ErrNotFound)
}

func TestPutSecretMergesStringData(t *testing.T) {
	s, _ := openTemp(t, Options{})
	sec := testSecret("creds", map[string]string{"user": "u", "pass": "old"})
	sec.StringData = map[string]string{"pass": "new"}
	var rec SecretRecord
	require.NoError(t, s.Update(false, func(tx *Txn) (err error) {
		rec, _, err = tx.PutSecret(sec, "", t0)
		return err
	}))
	assert.Nil(t, rec.Object.StringData)
	assert.Equal(t, map[string][]byte{"user": []byte("u"), "pass": []byte("new")}, rec.Object.Data)
	assert.Equal(t, "old", string(sec.Data["pass"]), "the caller's secret is not modified")
	assert.Equal(t, schema.SecretHash(WireSecret(rec.Object)), rec.Hash)

	recs, err := s.ListSecrets()
	require.NoError(t, err)
	require.Len(t, recs, 1)
	assert.Equal(t, rec, recs[0])
}

func TestWireConfigObjectsKeepOnlyWhatDevicesNeed(t *testing.T) {
	c := testConfigMap("cfg", map[string]string{"a": "1"})
	c.Metadata.Labels = map[string]string{"x": "y"}
	c.BinaryData = map[string][]byte{"b": {0, 1}}
	assert.Equal(t, schema.ConfigMap{
		TypeMeta: schema.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		Metadata: schema.ObjectMeta{Namespace: "default", Name: "cfg"},
		Data:     map[string]string{"a": "1"}, BinaryData: map[string][]byte{"b": {0, 1}},
	}, WireConfigMap(c))

	sec := testSecret("s", map[string]string{"k": "v"})
	sec.Metadata.Namespace, sec.Metadata.Annotations = "edge", map[string]string{"note": "n"}
	assert.Equal(t, schema.Secret{
		TypeMeta: schema.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		Metadata: schema.ObjectMeta{Namespace: "edge", Name: "s"},
		Type:     schema.SecretTypeOpaque, Data: map[string][]byte{"k": []byte("v")},
	}, WireSecret(sec))
}

func TestDeleteConfigObjects(t *testing.T) {
	s, _ := openTemp(t, Options{})
	putConfigMap(t, s, testConfigMap("cfg", map[string]string{"a": "1"}), "")
	require.NoError(t, s.Update(false, func(tx *Txn) error {
		found, err := tx.DeleteConfigMap("default/cfg")
		assert.True(t, found)
		if err != nil {
			return err
		}
		found, err = tx.DeleteSecret("default/none")
		assert.False(t, found)
		return err
	}))
	recs, err := s.ListConfigMaps()
	require.NoError(t, err)
	assert.Empty(t, recs)
}

// TestUpdateIsAllOrNothing: one request's daemonset, ConfigMap and Secret
// land together; a failure or a dry run leaves none of them.
func TestUpdateIsAllOrNothing(t *testing.T) {
	s, _ := openTemp(t, Options{})
	now := t0
	write := func(tx *Txn) error {
		if _, _, err := tx.PutConfigMap(testConfigMap("cfg", map[string]string{"a": "1"}), "", now); err != nil {
			return err
		}
		if _, _, err := tx.PutSecret(testSecret("sec", map[string]string{"k": "v"}), "", now); err != nil {
			return err
		}
		_, _, err := tx.PutDaemonSet(testDaemonSet("ds", "img:1"), now)
		return err
	}
	count := func() int {
		cms, err := s.ListConfigMaps()
		require.NoError(t, err)
		secs, err := s.ListSecrets()
		require.NoError(t, err)
		dss, err := s.ListDaemonSets()
		require.NoError(t, err)
		return len(cms) + len(secs) + len(dss)
	}
	boom := errors.New("boom")
	err := s.Update(false, func(tx *Txn) error {
		if err := write(tx); err != nil {
			return err
		}
		return boom
	})
	require.ErrorIs(t, err, boom)
	assert.Equal(t, 0, count(), "a failed request keeps nothing")

	require.NoError(t, s.Update(true, write))
	assert.Equal(t, 0, count(), "a dry run keeps nothing")

	require.NoError(t, s.Update(false, write))
	assert.Equal(t, 3, count())
}

// TestMigrateAddsConfigBuckets opens a schema-1 store (before config
// objects) and finds it upgraded with its data kept.
func TestMigrateAddsConfigBuckets(t *testing.T) {
	s, path := openTemp(t, Options{})
	_, _, err := s.PutDaemonSet(testDaemonSet("ds", "img:1"), t0)
	require.NoError(t, err)
	require.NoError(t, s.db.Update(func(tx *bbolt.Tx) error {
		for _, name := range [][]byte{bucketConfigMaps, bucketSecrets} {
			if err := tx.DeleteBucket(name); err != nil {
				return err
			}
		}
		return tx.Bucket(bucketMeta).Put(keySchemaVersion, u64Key(1))
	}))
	require.NoError(t, s.Close())

	s, err = Open(path, Options{})
	require.NoError(t, err)
	defer s.Close()
	putConfigMap(t, s, testConfigMap("cfg", nil), "")
	dss, err := s.ListDaemonSets()
	require.NoError(t, err)
	assert.Len(t, dss, 1)
	require.NoError(t, s.db.View(func(tx *bbolt.Tx) error {
		v, err := schemaVersion(&boltTx{tx: tx})
		assert.Equal(t, uint64(len(migrations)), v)
		return err
	}))
}
