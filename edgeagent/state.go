package edgeagent

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/edgeset/edgeset/internal/boltfile"
	"github.com/edgeset/edgeset/schema"
)

// StateFile is the name of the agent's local database inside DataDir.
const StateFile = "agent.db"

// localState is what the agent persists: the last accepted desired state,
// the revisions and config objects it references that have arrived (each
// by its content hash), the generation the reconciler last applied, and
// the restart count of each instance that has restarted (by
// restartsKey), so that an agent restart neither resets RESTARTS nor
// renames the kubelet-style log links named by it; and the updates an
// update lock deferred, by daemonset, so that a restarted agent still
// waits for the controller's answer (updatelock.go).
type localState struct {
	desired    *schema.DesiredState
	revisions  map[string]schema.Revision
	configMaps map[string]schema.ConfigMap
	// secrets are the Secrets as kept at rest: each a SealedSecretMessage
	// sealed to the node's key (a store written before sealing holds a
	// schema.Secret's JSON instead; restoreSecret migrates it).
	secrets   map[string]json.RawMessage
	applied   uint64
	restarts  map[string]int32
	deferrals map[string]deferral
}

func newLocalState() localState {
	return localState{revisions: map[string]schema.Revision{}, configMaps: map[string]schema.ConfigMap{},
		secrets: map[string]json.RawMessage{}, restarts: map[string]int32{}, deferrals: map[string]deferral{}}
}

// restartsKey is an instance's key in localState.restarts:
// "namespace/name@revision".
func restartsKey(k instanceKey) string { return k.DaemonSet + "@" + k.Revision }

// stateStore persists localState. saveDesired writes the desired state and
// drops the revisions and config objects it no longer references in one
// transaction.
type stateStore interface {
	load() (localState, error)
	saveDesired(ds schema.DesiredState) error
	saveRevision(rev schema.Revision) error
	saveConfigMap(hash string, cm schema.ConfigMap) error
	// saveSecret keeps a Secret as sealed, a SealedSecretMessage's JSON.
	saveSecret(hash string, sealed json.RawMessage) error
	// dropSecrets forgets every Secret (secrets-at-rest: memory).
	dropSecrets() error
	saveApplied(gen uint64) error
	// saveRestarts replaces the persisted restart counts with restarts.
	saveRestarts(restarts map[string]int32) error
	// saveDeferrals replaces the persisted deferred updates with d.
	saveDeferrals(d map[string]deferral) error
	close() error
}

var (
	bucketMeta       = []byte("meta")
	bucketRevisions  = []byte("revisions")
	bucketConfigMaps = []byte("configmaps")
	bucketSecrets    = []byte("secrets")
	bucketRestarts   = []byte("restarts")
	bucketDeferrals  = []byte("deferrals")
	keyDesired       = []byte("desired")
	keyApplied       = []byte("applied")
)

// boltStore is the on-disk stateStore: DataDir/agent.db.
type boltStore struct {
	db   *bolt.DB
	path string
}

// openBoltStore opens DataDir/agent.db. A file bbolt cannot read is moved
// aside (setAside is its new name) and replaced by an empty one: the file
// caches what the controller sends again, and a damaged one must not keep
// the agent from starting.
func openBoltStore(dir string) (s *boltStore, setAside string, err error) {
	p := filepath.Join(dir, StateFile)
	db, setAside, err := boltfile.OpenOrSetAside(p, bolt.Options{Timeout: time.Second})
	if err != nil {
		return nil, setAside, fmt.Errorf("open agent state %s: %w", p, err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		for _, b := range [][]byte{bucketMeta, bucketRevisions, bucketConfigMaps, bucketSecrets, bucketRestarts, bucketDeferrals} {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		db.Close()
		return nil, setAside, fmt.Errorf("init agent state %s: %w", p, err)
	}
	return &boltStore{db: db, path: p}, setAside, nil
}

func (s *boltStore) load() (localState, error) {
	st := newLocalState()
	err := s.db.View(func(tx *bolt.Tx) error {
		meta := tx.Bucket(bucketMeta)
		if v := meta.Get(keyApplied); len(v) == 8 {
			st.applied = binary.BigEndian.Uint64(v)
		}
		if v := meta.Get(keyDesired); v != nil {
			var ds schema.DesiredState
			if err := json.Unmarshal(v, &ds); err != nil {
				return fmt.Errorf("desired state: %w", err)
			}
			st.desired = &ds
		}
		if err := loadBucket(tx.Bucket(bucketRevisions), "revision", st.revisions); err != nil {
			return err
		}
		if err := loadBucket(tx.Bucket(bucketConfigMaps), "configmap", st.configMaps); err != nil {
			return err
		}
		if err := loadBucket(tx.Bucket(bucketRestarts), "restart count", st.restarts); err != nil {
			return err
		}
		if err := loadBucket(tx.Bucket(bucketDeferrals), "deferred update", st.deferrals); err != nil {
			return err
		}
		return loadBucket(tx.Bucket(bucketSecrets), "secret", st.secrets)
	})
	if err != nil {
		return localState{}, fmt.Errorf("load agent state %s: %w", s.path, err)
	}
	return st, nil
}

// loadBucket decodes every value of b into out, by key. The error names
// the key, never the value (a secret's).
func loadBucket[V any](b *bolt.Bucket, what string, out map[string]V) error {
	return b.ForEach(func(k, v []byte) error {
		var x V
		if err := json.Unmarshal(v, &x); err != nil {
			return fmt.Errorf("%s %s: cannot decode", what, k)
		}
		out[string(k)] = x
		return nil
	})
}

func (s *boltStore) saveDesired(ds schema.DesiredState) error {
	b, err := json.Marshal(ds)
	if err != nil {
		return fmt.Errorf("encode desired state: %w", err)
	}
	err = s.db.Update(func(tx *bolt.Tx) error {
		if err := tx.Bucket(bucketMeta).Put(keyDesired, b); err != nil {
			return err
		}
		if err := dropUnreferenced(tx.Bucket(bucketRevisions), referencedRevisions(ds)); err != nil {
			return err
		}
		if err := dropUnreferenced(tx.Bucket(bucketConfigMaps), refHashes(ds.ConfigMaps)); err != nil {
			return err
		}
		return dropUnreferenced(tx.Bucket(bucketSecrets), refHashes(ds.Secrets))
	})
	if err != nil {
		return fmt.Errorf("save desired state generation %d to %s: %w", ds.Generation, s.path, err)
	}
	return nil
}

func dropUnreferenced(b *bolt.Bucket, keep map[string]bool) error {
	var drop [][]byte
	err := b.ForEach(func(k, _ []byte) error {
		if !keep[string(k)] {
			drop = append(drop, append([]byte(nil), k...))
		}
		return nil
	})
	for _, k := range drop {
		if err == nil {
			err = b.Delete(k)
		}
	}
	return err
}

func (s *boltStore) saveRevision(rev schema.Revision) error {
	b, err := json.Marshal(rev)
	if err != nil {
		return fmt.Errorf("encode revision %s: %w", rev.Hash, err)
	}
	err = s.db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketRevisions).Put([]byte(rev.Hash), b)
	})
	if err != nil {
		return fmt.Errorf("save revision %s to %s: %w", rev.Hash, s.path, err)
	}
	return nil
}

func (s *boltStore) saveConfigMap(hash string, cm schema.ConfigMap) error {
	return s.putObject(bucketConfigMaps, "configmap "+cm.Key(), hash, cm)
}

func (s *boltStore) saveSecret(hash string, sealed json.RawMessage) error {
	return s.putObject(bucketSecrets, "secret", hash, sealed)
}

func (s *boltStore) dropSecrets() error {
	err := s.db.Update(func(tx *bolt.Tx) error {
		if err := tx.DeleteBucket(bucketSecrets); err != nil {
			return err
		}
		_, err := tx.CreateBucket(bucketSecrets)
		return err
	})
	if err != nil {
		return fmt.Errorf("drop secrets from %s: %w", s.path, err)
	}
	return nil
}

// putObject stores v under hash in bucket; errors name what (never the
// value).
func (s *boltStore) putObject(bucket []byte, what, hash string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode %s: %w", what, err)
	}
	err = s.db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(bucket).Put([]byte(hash), b)
	})
	if err != nil {
		return fmt.Errorf("save %s (%s) to %s: %w", what, hash, s.path, err)
	}
	return nil
}

func (s *boltStore) saveApplied(gen uint64) error {
	v := binary.BigEndian.AppendUint64(nil, gen)
	err := s.db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketMeta).Put(keyApplied, v)
	})
	if err != nil {
		return fmt.Errorf("save applied generation %d to %s: %w", gen, s.path, err)
	}
	return nil
}

func (s *boltStore) saveRestarts(restarts map[string]int32) error {
	err := s.db.Update(func(tx *bolt.Tx) error {
		if err := tx.DeleteBucket(bucketRestarts); err != nil {
			return err
		}
		b, err := tx.CreateBucket(bucketRestarts)
		if err != nil {
			return err
		}
		for k, n := range restarts {
			if err := b.Put([]byte(k), strconv.AppendInt(nil, int64(n), 10)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("save restart counts to %s: %w", s.path, err)
	}
	return nil
}

func (s *boltStore) saveDeferrals(d map[string]deferral) error {
	err := s.db.Update(func(tx *bolt.Tx) error {
		if err := tx.DeleteBucket(bucketDeferrals); err != nil {
			return err
		}
		b, err := tx.CreateBucket(bucketDeferrals)
		if err != nil {
			return err
		}
		for ds, v := range d {
			raw, err := json.Marshal(v)
			if err != nil {
				return err
			}
			if err := b.Put([]byte(ds), raw); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("save deferred updates to %s: %w", s.path, err)
	}
	return nil
}

func (s *boltStore) close() error {
	if err := s.db.Close(); err != nil {
		return fmt.Errorf("close agent state %s: %w", s.path, err)
	}
	return nil
}

// referencedRevisions returns the set of revision hashes ds references.
func referencedRevisions(ds schema.DesiredState) map[string]bool {
	keep := make(map[string]bool, len(ds.Instances))
	for _, in := range ds.Instances {
		keep[in.Revision] = true
	}
	return keep
}

// refHashes returns the set of hashes of refs.
func refHashes(refs []schema.ObjectRef) map[string]bool {
	keep := make(map[string]bool, len(refs))
	for _, r := range refs {
		keep[r.Hash] = true
	}
	return keep
}

// memoryStore keeps state in memory only (Config.Ephemeral), for simulators
// that run thousands of agents in one process.
type memoryStore struct {
	mu sync.Mutex // guards st
	st localState
}

func newMemoryStore() *memoryStore {
	return &memoryStore{st: newLocalState()}
}

func (m *memoryStore) load() (localState, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return localState{
		desired: m.st.desired, revisions: maps.Clone(m.st.revisions), applied: m.st.applied,
		configMaps: maps.Clone(m.st.configMaps), secrets: maps.Clone(m.st.secrets),
		restarts: maps.Clone(m.st.restarts), deferrals: maps.Clone(m.st.deferrals),
	}, nil
}

func (m *memoryStore) saveDesired(ds schema.DesiredState) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.st.desired = &ds
	dropKeys(m.st.revisions, referencedRevisions(ds))
	dropKeys(m.st.configMaps, refHashes(ds.ConfigMaps))
	dropKeys(m.st.secrets, refHashes(ds.Secrets))
	return nil
}

func dropKeys[V any](m map[string]V, keep map[string]bool) {
	for k := range m {
		if !keep[k] {
			delete(m, k)
		}
	}
}

func (m *memoryStore) saveConfigMap(hash string, cm schema.ConfigMap) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.st.configMaps[hash] = cm
	return nil
}

func (m *memoryStore) saveSecret(hash string, sealed json.RawMessage) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.st.secrets[hash] = sealed
	return nil
}

func (m *memoryStore) dropSecrets() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	clear(m.st.secrets)
	return nil
}

func (m *memoryStore) saveRevision(rev schema.Revision) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.st.revisions[rev.Hash] = rev
	return nil
}

func (m *memoryStore) saveApplied(gen uint64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.st.applied = gen
	return nil
}

func (m *memoryStore) saveRestarts(restarts map[string]int32) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.st.restarts = maps.Clone(restarts)
	return nil
}

func (m *memoryStore) saveDeferrals(d map[string]deferral) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.st.deferrals = maps.Clone(d)
	return nil
}

func (m *memoryStore) close() error { return nil }

var errNoDataDir = errors.New("config: DataDir is required unless Ephemeral is set")
