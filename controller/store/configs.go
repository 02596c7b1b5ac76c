package store

import (
	"fmt"
	"maps"
	"time"

	"github.com/edgeset/edgeset/schema"
)

// ConfigObject is a kind of config object the store keeps.
type ConfigObject interface {
	schema.ConfigMap | schema.Secret
}

// ConfigRecord is a stored ConfigMap or Secret with the controller's
// bookkeeping, under "namespace/name" in the configmaps or secrets bucket.
type ConfigRecord[T ConfigObject] struct {
	// Object is the object as last applied, namespace defaulted; a
	// Secret's StringData is merged into Data, as the Kubernetes API
	// server does.
	Object T `json:"object"`
	// Hash is the content address of what devices receive (see
	// WireConfigMap, WireSecret): metadata other than the namespace and
	// name does not count.
	Hash string `json:"hash"`
	// ResourceVersion is unique among the records of the kind, ever: it
	// is set from the bucket's sequence at every write.
	ResourceVersion uint64 `json:"resourceVersion"`
	// Generation starts at 1 and grows by one each time Hash changes.
	Generation int64     `json:"generation"`
	CreatedAt  time.Time `json:"createdAt"`
	UpdatedAt  time.Time `json:"updatedAt"`
	// Source says who applied the object last, as DaemonSetRecord.Source.
	Source string `json:"source,omitempty"`
}

// ConfigMapRecord and SecretRecord are the stored config objects.
type (
	ConfigMapRecord = ConfigRecord[schema.ConfigMap]
	SecretRecord    = ConfigRecord[schema.Secret]
)

// WireConfigMap returns what a device needs of c: its kind, namespace
// (defaulted), name, data and binaryData.
func WireConfigMap(c schema.ConfigMap) schema.ConfigMap {
	return schema.ConfigMap{
		TypeMeta:   schema.TypeMeta{APIVersion: schema.APIVersionCore, Kind: schema.KindConfigMap},
		Metadata:   schema.ObjectMeta{Namespace: namespaceOfMeta(c.Metadata), Name: c.Metadata.Name},
		Data:       c.Data,
		BinaryData: c.BinaryData,
	}
}

// WireSecret returns what a device needs of s: its kind, namespace
// (defaulted), name, type and data, StringData merged into Data.
func WireSecret(s schema.Secret) schema.Secret {
	s = normalSecret(s)
	return schema.Secret{
		TypeMeta: schema.TypeMeta{APIVersion: schema.APIVersionCore, Kind: schema.KindSecret},
		Metadata: schema.ObjectMeta{Namespace: namespaceOfMeta(s.Metadata), Name: s.Metadata.Name},
		Type:     s.Type,
		Data:     s.Data,
	}
}

// normalSecret merges StringData into Data (StringData wins, as in
// Kubernetes) and drops it. s itself is not modified.
func normalSecret(s schema.Secret) schema.Secret {
	if len(s.StringData) == 0 {
		s.StringData = nil
		return s
	}
	data := make(map[string][]byte, len(s.Data)+len(s.StringData))
	maps.Copy(data, s.Data)
	for k, v := range s.StringData {
		data[k] = []byte(v)
	}
	s.Data, s.StringData = data, nil
	return s
}

func namespaceOfMeta(m schema.ObjectMeta) string {
	if m.Namespace == "" {
		return schema.DefaultNamespace
	}
	return m.Namespace
}

// PutConfigMap applies c (namespace defaulted) recording source as who
// applied it. changed is false when the object is what is stored; the
// record is then rewritten only if the source differs, keeping its
// resourceVersion.
func (t *Txn) PutConfigMap(c schema.ConfigMap, source string, now time.Time) (ConfigMapRecord, bool, error) {
	c.Metadata.Namespace = namespaceOfMeta(c.Metadata)
	return putConfig(t.tx, bucketConfigMaps, configMapRecords, c.Key(), c,
		schema.ConfigMapHash(WireConfigMap(c)), source, now)
}

// PutSecret is PutConfigMap for a Secret.
func (t *Txn) PutSecret(s schema.Secret, source string, now time.Time) (SecretRecord, bool, error) {
	s = normalSecret(s)
	s.Metadata.Namespace = namespaceOfMeta(s.Metadata)
	return putConfig(t.tx, bucketSecrets, secretRecords(t.secretCodec()), s.Key(), s, schema.SecretHash(WireSecret(s)), source, now)
}

// records reads and writes the records of one config bucket: plain JSON
// (configMapRecords), or a Secret's through the store's cipher
// (secretRecords).
type records[T ConfigObject] struct {
	get func(tx *boltTx, key string) (ConfigRecord[T], bool, error)
	put func(tx *boltTx, key string, rec ConfigRecord[T]) error
}

// configMapRecords are the ConfigMap records, stored as their JSON.
var configMapRecords = records[schema.ConfigMap]{
	get: func(tx *boltTx, key string) (rec ConfigMapRecord, found bool, err error) {
		found, err = getJSON(tx, bucketConfigMaps, key, &rec)
		return rec, found, err
	},
	put: func(tx *boltTx, key string, rec ConfigMapRecord) error {
		return putJSON(tx, bucketConfigMaps, key, rec)
	},
}

// secretRecords are the Secret records, through c.
func secretRecords(c secretCodec) records[schema.Secret] {
	return records[schema.Secret]{get: c.get, put: c.put}
}

func putConfig[T ConfigObject](tx *boltTx, name []byte, recs records[T], key string, obj T, hash, source string, now time.Time) (ConfigRecord[T], bool, error) {
	old, found, err := recs.get(tx, key)
	if err != nil {
		return old, false, err
	}
	rec := old
	changed := !found
	if found {
		if changed, err = jsonDiffers(old.Object, obj); err != nil {
			return old, false, err
		}
	}
	if !changed && rec.Source == source {
		return old, false, nil
	}
	if changed {
		rec.Object, rec.UpdatedAt = obj, now
		if !found {
			rec.CreatedAt = now
		}
		if rec.Hash != hash {
			rec.Hash = hash
			rec.Generation++
		}
		b, err := bucket(tx, name)
		if err != nil {
			return old, false, err
		}
		if rec.ResourceVersion, err = b.NextSequence(); err != nil {
			return old, false, err
		}
	}
	rec.Source = source
	return rec, changed, recs.put(tx, key, rec)
}

// GetConfigMap returns the record under key ("namespace/name"); found is
// false when there is none.
func (t *Txn) GetConfigMap(key string) (rec ConfigMapRecord, found bool, err error) {
	found, err = getJSON(t.tx, bucketConfigMaps, key, &rec)
	return rec, found, err
}

// GetSecret is GetConfigMap for a Secret.
func (t *Txn) GetSecret(key string) (rec SecretRecord, found bool, err error) {
	return t.secretCodec().get(t.tx, key)
}

// DeleteConfigMap removes the record under key; found is false when there
// was none.
func (t *Txn) DeleteConfigMap(key string) (found bool, err error) {
	return deleteConfig(t.tx, bucketConfigMaps, key)
}

// DeleteSecret is DeleteConfigMap for a Secret.
func (t *Txn) DeleteSecret(key string) (found bool, err error) {
	return deleteConfig(t.tx, bucketSecrets, key)
}

func deleteConfig(tx *boltTx, name []byte, key string) (bool, error) {
	b, err := bucket(tx, name)
	if err != nil || b.Get([]byte(key)) == nil {
		return false, err
	}
	return true, deleteKey(tx, name, key)
}

// CountConfigMaps returns how many ConfigMaps the store holds.
func (t *Txn) CountConfigMaps() (int, error) { return countKeys(t.tx, bucketConfigMaps) }

// CountSecrets returns how many Secrets the store holds.
func (t *Txn) CountSecrets() (int, error) { return countKeys(t.tx, bucketSecrets) }

func countKeys(tx *boltTx, name []byte) (int, error) {
	b, err := bucket(tx, name)
	if err != nil {
		return 0, err
	}
	return b.Stats().KeyN, nil
}

// ListConfigMaps returns every ConfigMap record, ordered by key.
func (t *Txn) ListConfigMaps() ([]ConfigMapRecord, error) {
	return listJSON[ConfigMapRecord](t.tx, bucketConfigMaps)
}

// ListSecrets returns every Secret record, ordered by key.
func (t *Txn) ListSecrets() ([]SecretRecord, error) {
	return t.secretCodec().list(t.tx)
}

// ListConfigMaps returns every ConfigMap record, ordered by key.
func (s *Store) ListConfigMaps() (recs []ConfigMapRecord, err error) {
	err = s.View(func(t *Txn) error { recs, err = t.ListConfigMaps(); return err })
	return recs, err
}

// ListSecrets returns every Secret record, ordered by key.
func (s *Store) ListSecrets() (recs []SecretRecord, err error) {
	err = s.View(func(t *Txn) error { recs, err = t.ListSecrets(); return err })
	return recs, err
}

// GetConfigMap returns the record under key, or an error wrapping
// ErrNotFound.
func (s *Store) GetConfigMap(key string) (rec ConfigMapRecord, err error) {
	err = s.View(func(t *Txn) error { return mustGetJSON(t.tx, bucketConfigMaps, key, &rec) })
	return rec, err
}

// GetSecret returns the record under key, or an error wrapping
// ErrNotFound.
func (s *Store) GetSecret(key string) (rec SecretRecord, err error) {
	err = s.View(func(t *Txn) error {
		found := false
		rec, found, err = t.GetSecret(key)
		if err == nil && !found {
			err = fmt.Errorf("%s/%s: %w", bucketSecrets, key, ErrNotFound)
		}
		return err
	})
	return rec, err
}
