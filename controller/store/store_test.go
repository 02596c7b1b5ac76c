package store

import (
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/edgeset/edgeset/schema"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.etcd.io/bbolt"
)

var t0 = time.Date(2025, 3, 4, 5, 6, 7, 0, time.UTC)

// openTemp opens a fresh store in a test directory, closed at cleanup.
// openTemp opens a new store in a temporary directory. Unless opts has
// its own Replicate, a mirror replays its write sets onto a second file
// and the test fails when the two differ at its end (see mirror).
func openTemp(t testing.TB, opts Options) (*Store, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "edgeset.db")
	var m *mirror
	var s *Store
	if opts.Replicate == nil {
		m = newMirror(t)
		opts = m.attach(opts, &s)
	}
	s, err := Open(path, opts)
	require.NoError(t, err)
	if m != nil {
		m.noteCommit(s)
		t.Cleanup(func() { m.check(t, s) })
	} else {
		t.Cleanup(func() { _ = s.Close() })
	}
	return s, path
}

// openTempUnmirrored is openTemp without the mirror, for tests that inject
// disk faults (FailWrites): the fault strikes after the write set was
// replicated, so a mirror would be ahead of the file by design (see
// TestReplicateThenCommitFailsIsBehind).
func openTempUnmirrored(t testing.TB, opts Options) (*Store, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "edgeset.db")
	s, err := Open(path, opts)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return s, path
}

func testDaemonSet(name, image string) *schema.DaemonSet {
	return &schema.DaemonSet{
		TypeMeta: schema.TypeMeta{APIVersion: schema.APIVersionApps, Kind: schema.KindDaemonSet},
		Metadata: schema.ObjectMeta{Name: name},
		Spec: schema.DaemonSetSpec{
			Selector: &schema.LabelSelector{MatchLabels: map[string]string{"app": name}},
			Template: testTemplate(name, image),
		},
	}
}

func testTemplate(name, image string) schema.PodTemplateSpec {
	return schema.PodTemplateSpec{
		Metadata: schema.ObjectMeta{Labels: map[string]string{"app": name}},
		Spec:     schema.PodSpec{Containers: []schema.Container{{Name: name, Image: image}}},
	}
}

// openAsync runs Open in a goroutine and fails the test if it has not
// returned within a generous bound: a lock wait must end, not hang.
func openAsync(t *testing.T, path string, opts Options) error {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		s, err := Open(path, opts)
		if err == nil {
			_ = s.Close()
		}
		done <- err
	}()
	select {
	case err := <-done:
		return err
	case <-time.After(30 * time.Second):
		t.Fatalf("Open(%s) with LockTimeout %s still waiting after 30s", path, opts.LockTimeout)
		return nil
	}
}

func TestOpenWritesSchemaVersion(t *testing.T) {
	s, path := openTemp(t, Options{})
	require.NoError(t, s.db.View(func(tx *bbolt.Tx) error {
		v, err := schemaVersion(&boltTx{tx: tx})
		assert.Equal(t, uint64(len(migrations)), v)
		return err
	}))
	require.NoError(t, s.Close())

	s2, err := Open(path, Options{})
	require.NoError(t, err, "reopen")
	require.NoError(t, s2.Close())
}

func TestCloseIsIdempotent(t *testing.T) {
	s, _ := openTemp(t, Options{})
	require.NoError(t, s.Close())
	require.NoError(t, s.Close())

	_, err := s.GetDaemonSet("default/x")
	require.ErrorIs(t, err, ErrClosed)
	_, err = s.AppendEvent(Event{Reason: "x"})
	require.ErrorIs(t, err, ErrClosed)
}

func TestOpenLockedInSameProcess(t *testing.T) {
	_, path := openTemp(t, Options{})

	err := openAsync(t, path, Options{LockTimeout: 150 * time.Millisecond})
	require.ErrorIs(t, err, ErrLocked)
	assert.Contains(t, err.Error(), path)
	assert.Contains(t, err.Error(), "another edgeset-controller")
}

func TestOpenUnreadableFile(t *testing.T) {
	random := make([]byte, 64<<10)
	_, _ = rand.Read(random)
	cases := []struct {
		name  string
		write func(t *testing.T, path string)
	}{
		{"random bytes", writeBytes(random)},
		{"short text", writeBytes([]byte("hello, not a database\n"))},
		{"zero page", writeBytes(make([]byte, 4096))},
		{"zero pages", writeBytes(make([]byte, 64<<10))},
		// bbolt panics on this one; Open recovers.
		{"truncated store", writeTruncatedStore(8192)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "garbage.db")
			tc.write(t, path)

			s, err := Open(path, Options{LockTimeout: time.Second})
			if err == nil {
				_ = s.Close()
			}
			require.Error(t, err)
			assert.ErrorIs(t, err, ErrCorrupt)
			assert.Contains(t, err.Error(), path)

			// The failed open released the file: a second attempt gets
			// the same answer, not ErrLocked.
			_, err = Open(path, Options{LockTimeout: 100 * time.Millisecond})
			assert.ErrorIs(t, err, ErrCorrupt)
		})
	}
}

func writeBytes(content []byte) func(t *testing.T, path string) {
	return func(t *testing.T, path string) {
		require.NoError(t, os.WriteFile(path, content, 0o600))
	}
}

// writeTruncatedStore writes a store with some data and cuts it to size.
func writeTruncatedStore(size int64) func(t *testing.T, path string) {
	return func(t *testing.T, path string) {
		s, err := Open(path, Options{})
		require.NoError(t, err)
		for i := range 60 {
			_, _, err := s.PutDaemonSet(testDaemonSet(fmt.Sprintf("ds-%d", i), "img:1"), t0)
			require.NoError(t, err)
		}
		require.NoError(t, s.Close())
		require.NoError(t, os.Truncate(path, size))
	}
}

func TestOpenMissingDirectory(t *testing.T) {
	path := filepath.Join(t.TempDir(), "no-such-dir", "edgeset.db")
	_, err := Open(path, Options{})
	require.ErrorIs(t, err, os.ErrNotExist)
	assert.Contains(t, err.Error(), path)
}

func TestOpenForeignBoltFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "other.db")
	writeRaw(t, path, func(tx *bbolt.Tx) error {
		_, err := tx.CreateBucket([]byte("somebody-else"))
		return err
	})

	_, err := Open(path, Options{})
	require.ErrorIs(t, err, ErrCorrupt)
	assert.Contains(t, err.Error(), path)
}

func TestOpenNewerSchemaRefused(t *testing.T) {
	s, path := openTemp(t, Options{})
	_, _, err := s.PutDaemonSet(testDaemonSet("a", "img:1"), t0)
	require.NoError(t, err)
	require.NoError(t, s.Close())
	future := uint64(len(migrations)) + 6
	writeRaw(t, path, func(tx *bbolt.Tx) error {
		return tx.Bucket(bucketMeta).Put(keySchemaVersion, u64Key(future))
	})

	_, err = Open(path, Options{})
	require.ErrorIs(t, err, ErrNewerSchema)
	msg := err.Error()
	assert.Contains(t, msg, path)
	assert.Contains(t, msg, fmt.Sprintf("schema version %d", future))
	assert.Contains(t, msg, fmt.Sprintf("knows up to %d", len(migrations)))

	// The refused open changed nothing.
	writeRaw(t, path, func(tx *bbolt.Tx) error {
		v, err := schemaVersion(&boltTx{tx: tx})
		assert.Equal(t, future, v)
		return err
	})
}

// writeRaw runs fn on the file with bbolt directly, bypassing the store.
func writeRaw(t *testing.T, path string, fn func(tx *bbolt.Tx) error) {
	t.Helper()
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{Timeout: time.Second})
	require.NoError(t, err)
	require.NoError(t, db.Update(fn))
	require.NoError(t, db.Close())
}

func TestErrorsNameFileAndKey(t *testing.T) {
	s, path := openTemp(t, Options{})
	_, err := s.GetDaemonSet("default/missing")
	require.ErrorIs(t, err, ErrNotFound)
	for _, want := range []string{path, "daemonset", "default/missing"} {
		assert.True(t, strings.Contains(err.Error(), want), "%q lacks %q", err, want)
	}
}

func TestDecodeErrorNamesBucketAndKey(t *testing.T) {
	s, path := openTemp(t, Options{})
	require.NoError(t, s.Close())
	writeRaw(t, path, func(tx *bbolt.Tx) error {
		return tx.Bucket(bucketNodes).Put([]byte("n1"), []byte("{not json"))
	})
	s, err := Open(path, Options{})
	require.NoError(t, err)
	defer s.Close()

	_, err = s.GetNode("n1")
	require.Error(t, err)
	assert.False(t, errors.Is(err, ErrNotFound))
	assert.Contains(t, err.Error(), "nodes/n1")
	_, err = s.ListNodes()
	assert.ErrorContains(t, err, "nodes/n1")
}

// TestFreedPagesReusedAfterReopen: the freelist is not written with each
// commit (Open's NoFreelistSync) but rebuilt when the store opens, so the
// pages a large write freed before a restart are used again after it:
// the file does not grow when as much is written again.
func TestFreedPagesReusedAfterReopen(t *testing.T) {
	s, path := openTempUnmirrored(t, Options{})
	big := func(rev string) map[string]DesiredRecord {
		recs := map[string]DesiredRecord{}
		for i := range 3000 {
			instances := make([]schema.DesiredInstance, 8)
			for k := range instances {
				instances[k] = schema.DesiredInstance{DaemonSet: fmt.Sprintf("default/daemon-%d", k), Revision: rev}
			}
			recs[fmt.Sprintf("node-%05d", i)] = DesiredRecord{Instances: instances}
		}
		return recs
	}
	_, err := s.PutDesiredBatch(big("aaaaaaaaaaaaaaaaaaaa"))
	require.NoError(t, err)
	for i := range 3000 {
		require.NoError(t, s.DeleteDesired(fmt.Sprintf("node-%05d", i)))
	}
	fi, err := os.Stat(path)
	require.NoError(t, err)
	require.NoError(t, s.Close())

	s, err = Open(path, Options{})
	require.NoError(t, err)
	defer s.Close()
	_, err = s.PutDesiredBatch(big("bbbbbbbbbbbbbbbbbbbb"))
	require.NoError(t, err)
	after, err := os.Stat(path)
	require.NoError(t, err)
	assert.LessOrEqual(t, after.Size(), fi.Size(), "the file grew: the pages freed before the reopen were not reused")
	got, err := s.GetDesired("node-02999")
	require.NoError(t, err)
	assert.Equal(t, "bbbbbbbbbbbbbbbbbbbb", got.Instances[7].Revision)
}
