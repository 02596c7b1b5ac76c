// Package store is the edgeset controller's durable state: one bbolt file
// that holds what the operator declared and what the controller decided, so
// that a controller restarted after kill -9 or a power cut knows its
// daemonsets, their revisions, the fleet and exactly what it last published
// to every node before it reads a single MQTT message.
//
// # Durability
//
// Every method that writes returns only after its bbolt transaction has
// been committed and fsynced; the store never runs with NoSync. A method
// either applies all of its writes or none of them. When Open creates the
// file it also fsyncs the parent directory, so the file itself survives a
// power cut.
//
// # Damage
//
// Open refuses, with ErrCorrupt naming the file and what to do, a file
// that is empty, truncated, or fails the check of every page that
// boltfile.Open runs; bbolt's panics on a damaged page are recovered. Once
// a store has been opened, a marker file (MarkerPath) stays beside it, and
// while it exists a missing store file is ErrMissing: the store never
// silently starts empty in place of one that held data. Backup writes a
// consistent copy while the store serves; OpenReadOnly and Verify serve an
// offline backup and the check of a copy.
//
// # Write outcomes
//
// Options.OnWrite hears of every commit and of every write the disk
// refused, which the controller turns into readiness and metrics;
// FailWrites injects such refusals in tests.
//
// # Replication
//
// With Options.Replicate set (the HA controller, where etcd holds the
// state and the leader's file is a cache of it), every read-write
// transaction records its writes as a WriteSet, in the order it made them:
// puts and deletes of keys, buckets created and deleted (a delete takes
// the bucket's whole subtree), and each bucket's sequence as it is set.
// Once the transaction's function has succeeded, the write set goes to
// Replicate, and bbolt commits only if Replicate returned nil; otherwise
// the transaction rolls back and the writing method returns Replicate's
// error, wrapped. A commit that fails after Replicate took its write set
// (a full disk) leaves the file behind the replica: later writes fail
// with ErrBehind until the file is rebuilt from the replica. Open's
// migrations are replicated the same way; a
// transaction that wrote nothing calls no replicator. bbolt serializes
// writers, so Replicate sees the write sets in commit order. All access
// to bbolt goes through boltTx and boltBucket (writeset.go), which record
// every write; the package's tests replay the write sets of every store
// they open onto a second file and compare the two files when they end
// (mirror_test.go).
//
// # Exclusivity
//
// One controller owns a store. Open takes an exclusive lock on the file
// (flock) and gives up after Options.LockTimeout with an error wrapping
// ErrLocked.
//
// # Layout
//
// Values are JSON documents of the exported record types. Top-level buckets
// and their keys:
//
//	meta            "schemaVersion" -> 8-byte big-endian uint64; the events
//	                bucket's counters ("eventCount", "nodeEventCount",
//	                "ownEventFloor", "nodeEventFloor"; see Trimmed)
//	daemonsets      "namespace/name" -> DaemonSetRecord
//	revisions       "namespace/name" -> nested bucket: template hash -> Revision;
//	                the nested bucket's sequence numbers the revisions
//	nodeoverrides   node name -> NodeOverrides
//	nodes           node name -> NodeRecord
//	desired         node name -> DesiredRecord
//	desiredgen      node name -> 8-byte big-endian uint64, the highest
//	                desired generation ever stored for the node; kept when
//	                the node's desired record is deleted
//	rollouts        "namespace/name" -> a rollout state's head, JSON owned by
//	                the rollout package (before schema 3: the whole state)
//	rolloutnodes    "namespace/name" -> nested bucket: node name -> the node's
//	                entry of the rollout state, JSON owned by the rollout
//	                package (schema 3)
//	events          8-byte big-endian sequence number -> Event
//	configmaps      "namespace/name" -> ConfigMapRecord; the bucket's
//	                sequence numbers resourceVersions (schema 2)
//	secrets         "namespace/name" -> SecretRecord, likewise (schema 2);
//	                with Options.SecretCipher encrypted (secrets.go)
//	enrollments     enrollment code ID -> EnrollmentRecord (schema 4)
//	nodekeys        node name -> NodeKeyRecord, the key its Secrets are
//	                sealed to (created by its first write)
//
// Txn groups the writes of one API request (an apply of daemonsets,
// ConfigMaps and Secrets) into one transaction: all of it or none.
//
// The schema version counts the migrations applied (see migrate.go); Open
// applies the missing ones in one transaction and refuses a file written by a
// newer edgeset with ErrNewerSchema.
package store
