package store

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/edgeset/edgeset/controller/access"
	"github.com/edgeset/edgeset/controller/audit"
	"github.com/edgeset/edgeset/schema"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.etcd.io/bbolt"
)

// mirror is a Replicator that applies every write set to a second bbolt
// file, as a replica would: the mirror's content must then equal the
// store's, bucket by bucket, key by key, sequences included. openTemp
// gives every store of the package's tests one and compares the files
// when the test ends, so a write that bypasses boltTx/boltBucket fails
// the test that made it.
type mirror struct {
	db *bbolt.DB

	mu     sync.Mutex
	lastTx int // the store's last committed transaction seen
}

func newMirror(t testing.TB) *mirror {
	t.Helper()
	db, err := bbolt.Open(filepath.Join(t.TempDir(), "mirror.db"), 0o600, &bbolt.Options{Timeout: time.Second})
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	return &mirror{db: db}
}

func (m *mirror) replicate(_ context.Context, ws *WriteSet) error {
	return m.db.Update(func(tx *bbolt.Tx) error { return applyWriteSet(tx, ws) })
}

// applyWriteSet applies ws to tx the way a replica replays it; a write to
// a bucket that the write set never created fails.
func applyWriteSet(tx *bbolt.Tx, ws *WriteSet) error {
	for i, op := range ws.Ops {
		if err := applyOp(tx, op); err != nil {
			return fmt.Errorf("op %d (%s %s): %w", i, op.Kind, strings.Join(op.Bucket, "/"), err)
		}
	}
	return nil
}

func applyOp(tx *bbolt.Tx, op Op) error {
	n := len(op.Bucket)
	if n == 0 {
		return fmt.Errorf("op without a bucket")
	}
	var parent *bbolt.Bucket
	for _, name := range op.Bucket[:n-1] {
		if parent == nil {
			parent = tx.Bucket([]byte(name))
		} else {
			parent = parent.Bucket([]byte(name))
		}
		if parent == nil {
			return fmt.Errorf("parent bucket %s missing", name)
		}
	}
	last := []byte(op.Bucket[n-1])
	switch op.Kind {
	case OpCreateBucket:
		if parent == nil {
			_, err := tx.CreateBucket(last)
			return err
		}
		_, err := parent.CreateBucket(last)
		return err
	case OpDeleteBucket:
		if parent == nil {
			return tx.DeleteBucket(last)
		}
		return parent.DeleteBucket(last)
	}
	var b *bbolt.Bucket
	if parent == nil {
		b = tx.Bucket(last)
	} else {
		b = parent.Bucket(last)
	}
	if b == nil {
		return fmt.Errorf("bucket missing")
	}
	switch op.Kind {
	case OpPut:
		return b.Put(bytes.Clone(op.Key), bytes.Clone(op.Value))
	case OpDelete:
		return b.Delete(op.Key)
	case OpSetSequence:
		return b.SetSequence(op.Seq)
	}
	return fmt.Errorf("unknown op kind %d", op.Kind)
}

// dumpBolt lists every bucket (with its sequence) and key of a bbolt
// file, one line each, in order.
func dumpBolt(t testing.TB, db *bbolt.DB) []string {
	t.Helper()
	var out []string
	var walk func(path string, b *bbolt.Bucket)
	walk = func(path string, b *bbolt.Bucket) {
		out = append(out, fmt.Sprintf("bucket %s seq=%d", path, b.Sequence()))
		require.NoError(t, b.ForEach(func(k, v []byte) error {
			if v == nil {
				walk(path+"/"+strconv.Quote(string(k)), b.Bucket(k))
				return nil
			}
			sum := sha256.Sum256(v)
			out = append(out, fmt.Sprintf("key %s %q: %d bytes, sha256 %x", path, k, len(v), sum[:8]))
			return nil
		}))
	}
	require.NoError(t, db.View(func(tx *bbolt.Tx) error {
		return tx.ForEach(func(name []byte, b *bbolt.Bucket) error {
			walk(strconv.Quote(string(name)), b)
			return nil
		})
	}))
	return out
}

// attach wires the mirror into opts: Replicate, and an OnWrite that notes
// the store's last commit (chaining the test's own OnWrite).
func (m *mirror) attach(opts Options, s **Store) Options {
	opts.Replicate = m.replicate
	onWrite := opts.OnWrite
	opts.OnWrite = func(err error) {
		if err == nil && *s != nil {
			m.noteCommit(*s)
		}
		if onWrite != nil {
			onWrite(err)
		}
	}
	return opts
}

func (m *mirror) noteCommit(s *Store) {
	_ = s.db.View(func(tx *bbolt.Tx) error {
		m.mu.Lock()
		defer m.mu.Unlock()
		m.lastTx = max(m.lastTx, tx.ID())
		return nil
	})
}

// check compares the store's file with the mirror, unless something other
// than the mirrored store wrote the file since (a test that reopens the
// path, or writes raw to make an old or damaged file).
func (m *mirror) check(t testing.TB, s *Store) {
	t.Helper()
	require.NoError(t, s.Close())
	db, err := bbolt.Open(s.Path(), 0o600, &bbolt.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		t.Logf("mirror check skipped: %v", err)
		return
	}
	defer db.Close()
	var fileTx int
	require.NoError(t, db.View(func(tx *bbolt.Tx) error { fileTx = tx.ID(); return nil }))
	m.mu.Lock()
	last := m.lastTx
	m.mu.Unlock()
	if fileTx != last {
		t.Logf("mirror check skipped: the file is at transaction %d, the mirrored store last committed %d", fileTx, last)
		return
	}
	assert.Equal(t, dumpBolt(t, db), dumpBolt(t, m.db),
		"the replayed write sets differ from the store's file: a write bypassed boltTx/boltBucket")
}

// writeMethods are the methods of Store and Txn that write, each with a
// step of TestReplicateMirrorsEveryWrite that calls it; readMethods the
// others. A method in neither fails the test: a new write method must be
// added to the script.
var (
	writeMethods = map[string]bool{
		"PutDaemonSet": true, "SetCurrentRevision": true, "SetDaemonSetSource": true,
		"MarkDaemonSetDeleted": true, "DeleteDaemonSet": true, "RollBack": true, "SetRejected": true,
		"PutDesired": true, "PutDesiredBatch": true, "DeleteDesired": true,
		"WriteEvents": true, "AppendEvent": true, "AppendEvents": true,
		"PutNode": true, "PutNodes": true, "DeleteNode": true,
		"PutOverrides": true, "UpdateOverrides": true, "DeleteOverrides": true,
		"EnsureRevision": true, "PruneRevisions": true,
		"PutRolloutParts": true, "DeleteRollout": true,
		"PutConfigMap": true, "PutSecret": true, "DeleteConfigMap": true, "DeleteSecret": true,
		"PutEnrollment": true, "UpdateEnrollment": true, "DeleteEnrollment": true,
		"Probe": true, "Update": true,
		"PutUser": true, "DeleteUser": true, "AppendAudit": true, "FinishAudit": true, "NoteAudit": true, "BumpNodeEpoch": true,
		"PutKeySet":     true,
		"RewrapSecrets": true, "PutNodeKey": true, "DeleteNodeKey": true, // secrets_test.go
	}
	readMethods = map[string]bool{
		"Backup": true, "ListConfigMaps": true, "ListSecrets": true, "GetConfigMap": true, "GetSecret": true,
		"CountConfigMaps": true, "CountSecrets": true, "GetDaemonSet": true, "ListDaemonSets": true,
		"NextGeneration": true, "GetDesired": true, "ListDesired": true, "ListEvents": true,
		"GetNode": true, "ListNodes": true, "GetOverrides": true, "ListOverrides": true,
		"GetRevision": true, "RevisionsByHash": true, "ListRevisions": true, "GetRolloutParts": true,
		"Available": true, "Path": true, "Close": true, "FailWrites": true, "View": true,
		"ListEnrollments": true, "ListUsers": true, "ListAudit": true, "NodeEpochs": true,
		"KeySet": true, "ListNodeKeys": true,
	}
)

// TestReplicateMirrorsEveryWrite calls every write method of Store and
// Txn with a mirror attached (openTemp) and compares the store's file with
// the replayed write sets when it ends.
func TestReplicateMirrorsEveryWrite(t *testing.T) {
	for _, typ := range []reflect.Type{reflect.TypeFor[*Store](), reflect.TypeFor[*Txn]()} {
		for i := range typ.NumMethod() {
			name := typ.Method(i).Name
			assert.True(t, writeMethods[name] || readMethods[name],
				"%s.%s is in neither writeMethods nor readMethods: add it (and a step here if it writes)", typ, name)
		}
	}
	s, _ := openTemp(t, Options{MaxEvents: 4, MaxNodeEvents: 2})
	must := func(err error) {
		t.Helper()
		require.NoError(t, err)
	}
	for _, name := range []string{"a", "ab", "b"} {
		_, _, err := s.PutDaemonSet(testDaemonSet(name, "img:1"), t0)
		must(err)
		_, _, err = s.EnsureRevision("default/"+name, testTemplate(name, "img:1"), "first", t0)
		must(err)
		_, _, err = s.EnsureRevision("default/"+name, testTemplate(name, "img:2"), "second", t0)
		must(err)
	}
	rev2 := schema.TemplateHash(testTemplate("a", "img:2"))
	_, err := s.SetCurrentRevision("default/a", rev2, t0)
	must(err)
	_, err = s.SetDaemonSetSource("default/a", "manifests/a.yaml")
	must(err)
	_, err = s.PruneRevisions("default/b", 0, nil)
	must(err)
	must(s.Update(false, func(tx *Txn) error {
		if _, err := tx.RollBack("default/ab", testTemplate("ab", "img:1"), schema.TemplateHash(testTemplate("ab", "img:1")),
			RejectedRevision{Hash: "x", Number: 2, Reason: "crashed", Time: t0}, t0); err != nil {
			return err
		}
		_, _, err := tx.SetRejected("default/ab", nil)
		return err
	}))

	must(s.PutNode(NodeRecord{Name: "n1"}))
	must(s.PutNodes([]NodeRecord{{Name: "n2"}, {Name: "n3"}}))
	must(s.DeleteNode("n3"))
	must(s.PutOverrides("n1", NodeOverrides{Node: "n1"}))
	_, err = s.UpdateOverrides("n2", func(o *NodeOverrides) error { yes := true; o.Unschedulable = &yes; return nil })
	must(err)
	must(s.DeleteOverrides("n1"))
	must(s.PutEnrollment(EnrollmentRecord{ID: "e1", Uses: 2}))
	must(s.PutEnrollment(EnrollmentRecord{ID: "e2", Uses: 1}))
	_, err = s.UpdateEnrollment("e1", func(r *EnrollmentRecord, _ bool) error { r.Enrolled = append(r.Enrolled, "n1"); return nil })
	must(err)
	_, err = s.DeleteEnrollment("e2")
	must(err)

	_, err = s.PutDesired("n1", DesiredRecord{})
	must(err)
	_, err = s.PutDesiredBatch(map[string]DesiredRecord{"n1": {}, "n2": {}})
	must(err)
	must(s.DeleteDesired("n2"))

	entries := []RolloutEntry{{Node: "n1", Value: map[string]int{"x": 1}}, {Node: "n2", Value: "y"}}
	must(s.PutRolloutParts("default/a", map[string]string{"target": rev2}, entries, false))
	must(s.PutRolloutParts("default/ab", map[string]string{"target": "r"}, entries, false))
	must(s.PutRolloutParts("default/a", map[string]string{"target": rev2}, entries[:1], true))
	must(s.PutRolloutParts("default/a", nil, []RolloutEntry{{Node: "n1"}}, false))
	must(s.DeleteRollout("default/ab"))

	for i := range 6 {
		src := ""
		if i%2 == 0 {
			src = "n1"
		}
		_, err := s.AppendEvent(Event{Time: t0, Type: "Normal", Reason: "R", Object: "node/n1", Source: src})
		must(err)
	}
	_, err = s.AppendEvents([]Event{{Time: t0, Reason: "A"}, {Time: t0, Reason: "B"}})
	must(err)
	_, _, err = s.WriteEvents(EventWrite{Delete: []uint64{8}, Update: []Event{{Seq: 7, Time: t0, Reason: "C"}},
		Append: []Event{{Time: t0, Reason: "D", Source: "n2"}}})
	must(err)

	must(s.Update(false, func(tx *Txn) error {
		if _, _, err := tx.PutConfigMap(testConfigMap("c", map[string]string{"k": "v"}), "api", t0); err != nil {
			return err
		}
		if _, _, err := tx.PutSecret(testSecret("s", map[string]string{"k": "v"}), "api", t0); err != nil {
			return err
		}
		if _, _, err := tx.PutSecret(testSecret("s2", map[string]string{"k": "v"}), "api", t0); err != nil {
			return err
		}
		if _, err := tx.DeleteSecret("default/s2"); err != nil {
			return err
		}
		_, _, err := tx.PutConfigMap(testConfigMap("c2", nil), "api", t0)
		return err
	}))
	must(s.Update(false, func(tx *Txn) error { _, err := tx.DeleteConfigMap("default/c2"); return err }))
	must(s.Probe())

	_, err = s.MarkDaemonSetDeleted("default/b", t0)
	must(err)
	must(s.DeleteDaemonSet("default/b"))

	must(s.PutUser(access.User{Name: "ops", Role: access.RoleViewer, TokenHash: access.HashToken("t"), CreatedAt: t0}))
	must(s.PutUser(access.User{Name: "ci", Role: access.RoleOperator, TokenHash: access.HashToken("u"), CreatedAt: t0}))
	must(s.DeleteUser("ops"))
	ret := audit.Retention{MaxEntries: 2, MaxAge: time.Hour}
	for range 3 { // the third trims the first
		seq, err := s.AppendAudit(audit.Entry{Time: t0, User: "ci"}, ret, t0)
		must(err)
		must(s.NoteAudit(seq, "node=gw-1 command=[\"sh\"]"))
		must(s.FinishAudit(seq, 200, "", time.Millisecond))
	}
	_, err = s.BumpNodeEpoch("n1")
	must(err)
	_, err = s.BumpNodeEpoch("n1")
	must(err)
	must(s.PutKeySet([]byte(`{"version":1}`)))
	must(s.PutKeySet([]byte(`{"version":2}`)))
	env, err := s.KeySet()
	must(err)
	assert.Equal(t, `{"version":2}`, string(env))
}
