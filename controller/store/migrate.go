package store

import (
	"encoding/binary"
	"fmt"
	"runtime/debug"

	"go.etcd.io/bbolt"
)

// Bucket names; see the package documentation for their keys.
var (
	bucketMeta          = []byte("meta")
	bucketDaemonSets    = []byte("daemonsets")
	bucketRevisions     = []byte("revisions")
	bucketNodeOverrides = []byte("nodeoverrides")
	bucketNodes         = []byte("nodes")
	bucketDesired       = []byte("desired")
	bucketDesiredGen    = []byte("desiredgen")
	bucketRollouts      = []byte("rollouts")
	bucketEvents        = []byte("events")
	bucketConfigMaps    = []byte("configmaps")
	bucketSecrets       = []byte("secrets")
	bucketRolloutNodes  = []byte("rolloutnodes")
	bucketEnrollments   = []byte("enrollments")
)

var keySchemaVersion = []byte("schemaVersion")

// migrations[v] upgrades a store from schema version v to v+1, inside the
// transaction that records the new version. The schema version this code
// writes is len(migrations). Append only: a released migration never
// changes.
var migrations = []func(tx *boltTx) error{
	0: createBucketsV1,
	1: createConfigBucketsV2,
	2: createRolloutNodesBucketV3,
	3: createEnrollmentsBucketV4,
}

// codeSchemaVersion is the store schema version this code reads and writes.
var codeSchemaVersion = uint64(len(migrations))

// createBucketsV1 creates the buckets of schema version 1.
func createBucketsV1(tx *boltTx) error {
	for _, name := range [][]byte{
		bucketMeta, bucketDaemonSets, bucketRevisions, bucketNodeOverrides,
		bucketNodes, bucketDesired, bucketDesiredGen, bucketRollouts, bucketEvents,
	} {
		if _, err := tx.CreateBucketIfNotExists(name); err != nil {
			return fmt.Errorf("create bucket %s: %w", name, err)
		}
	}
	return nil
}

// createConfigBucketsV2 adds the ConfigMap and Secret buckets of schema
// version 2.
func createConfigBucketsV2(tx *boltTx) error {
	for _, name := range [][]byte{bucketConfigMaps, bucketSecrets} {
		if _, err := tx.CreateBucketIfNotExists(name); err != nil {
			return fmt.Errorf("create bucket %s: %w", name, err)
		}
	}
	return nil
}

// createRolloutNodesBucketV3 adds the bucket of rollout states' per-node
// entries of schema version 3 (see rollouts.go). Rollout records of
// earlier versions stay whole in the rollouts bucket: they load as they
// are and their first write replaces them.
func createRolloutNodesBucketV3(tx *boltTx) error {
	if _, err := tx.CreateBucketIfNotExists(bucketRolloutNodes); err != nil {
		return fmt.Errorf("create bucket %s: %w", bucketRolloutNodes, err)
	}
	return nil
}

// createEnrollmentsBucketV4 adds the bucket of enrollment codes of schema
// version 4 (enrollments.go).
func createEnrollmentsBucketV4(tx *boltTx) error {
	if _, err := tx.CreateBucketIfNotExists(bucketEnrollments); err != nil {
		return fmt.Errorf("create bucket %s: %w", bucketEnrollments, err)
	}
	return nil
}

// migrateSafely runs migrate in one transaction; a bbolt panic on a damaged
// file becomes ErrCorrupt.
func migrateSafely(db *bbolt.DB, replicate Replicator) (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true)) // see openBolt
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: bbolt: %v", ErrCorrupt, r)
		}
	}()
	return db.Update(func(tx *bbolt.Tx) error {
		_, err := runRecorded(tx, replicate, migrate, nil)
		return err
	})
}

// migrate brings the store to codeSchemaVersion. It refuses a newer store and a
// bbolt file that holds buckets but no edgeset schema version.
func migrate(tx *boltTx) error {
	version, err := schemaVersion(tx)
	if err != nil {
		return err
	}
	if version > codeSchemaVersion {
		return fmt.Errorf("%w: file has schema version %d, this edgeset knows up to %d; upgrade edgeset-controller",
			ErrNewerSchema, version, codeSchemaVersion)
	}
	if version == codeSchemaVersion {
		return nil
	}
	if version == 0 && tx.Bucket(bucketMeta) == nil && tx.hasBuckets() {
		return fmt.Errorf("%w: bbolt file of another program (buckets but no %s bucket)", ErrCorrupt, bucketMeta)
	}
	for v := version; v < codeSchemaVersion; v++ {
		if err := migrations[v](tx); err != nil {
			return fmt.Errorf("migrate schema %d to %d: %w", v, v+1, err)
		}
	}
	return tx.Bucket(bucketMeta).Put(keySchemaVersion, u64Key(codeSchemaVersion))
}

// schemaVersion reads the recorded version; a store without one is at 0.
func schemaVersion(tx *boltTx) (uint64, error) {
	meta := tx.Bucket(bucketMeta)
	if meta == nil {
		return 0, nil
	}
	v := meta.Get(keySchemaVersion)
	if v == nil {
		return 0, nil
	}
	if len(v) != 8 {
		return 0, fmt.Errorf("%w: %s/%s is %d bytes, want 8", ErrCorrupt, bucketMeta, keySchemaVersion, len(v))
	}
	return binary.BigEndian.Uint64(v), nil
}
