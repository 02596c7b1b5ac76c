package store

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestBackupRestores: a backup taken while the store is open and being
// written is a complete store: put in place of a lost one, it opens with
// everything the store held when the backup began.
func TestBackupRestores(t *testing.T) {
	s, _ := openTemp(t, Options{})
	_, _, err := s.PutDaemonSet(testDaemonSet("one", "img:1"), t0)
	require.NoError(t, err)
	var buf bytes.Buffer
	var size int64
	n, err := s.Backup(&buf, func(sz int64) { size = sz })
	require.NoError(t, err)
	assert.Equal(t, size, n)
	assert.EqualValues(t, buf.Len(), n)
	_, _, err = s.PutDaemonSet(testDaemonSet("two", "img:1"), t0)
	require.NoError(t, err, "the store keeps serving writes")

	restored := filepath.Join(t.TempDir(), "edgeset.db")
	require.NoError(t, os.WriteFile(restored, buf.Bytes(), 0o600))
	require.NoError(t, Verify(restored))
	r, err := Open(restored, Options{})
	require.NoError(t, err)
	defer r.Close()
	recs, err := r.ListDaemonSets()
	require.NoError(t, err)
	require.Len(t, recs, 1)
	assert.Equal(t, "default/one", recs[0].Key())
}

// TestOpenReadOnlyRefusesRunningStore: an offline backup of a store that a
// controller holds is refused, pointing at the online backup; a missing
// file is not created.
func TestOpenReadOnlyRefusesRunningStore(t *testing.T) {
	_, path := openTemp(t, Options{})
	_, err := OpenReadOnly(path, Options{LockTimeout: 100 * time.Millisecond})
	require.ErrorIs(t, err, ErrLocked)
	assert.Contains(t, err.Error(), "back it up through its API")

	missing := filepath.Join(t.TempDir(), "edgeset.db")
	_, err = OpenReadOnly(missing, Options{})
	require.ErrorIs(t, err, os.ErrNotExist)
	assert.NoFileExists(t, missing)
}

// TestVerifyRefusesDamage: a damaged or foreign file does not pass as a
// backup.
func TestVerifyRefusesDamage(t *testing.T) {
	path := heldStore(t, 300)
	overwriteMiddlePage(make([]byte, 4096))(t, path)
	require.ErrorIs(t, Verify(path), ErrCorrupt)

	empty := filepath.Join(t.TempDir(), "x.db")
	require.NoError(t, os.WriteFile(empty, []byte("not a store"), 0o600))
	require.ErrorIs(t, Verify(empty), ErrCorrupt)
}
