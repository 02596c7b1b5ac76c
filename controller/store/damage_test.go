package store

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// heldStore writes a store holding n daemonsets and closes it.
func heldStore(t *testing.T, n int) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "edgeset.db")
	s, err := Open(path, Options{})
	require.NoError(t, err)
	for i := range n {
		_, _, err := s.PutDaemonSet(testDaemonSet(fmt.Sprintf("ds-%d", i), "img:1"), t0)
		require.NoError(t, err)
	}
	require.NoError(t, s.Close())
	return path
}

// assertRefused checks that Open refuses path with err, naming the file
// and what to do.
func assertRefused(t *testing.T, path string, want error) {
	t.Helper()
	s, err := Open(path, Options{})
	if err == nil {
		_ = s.Close()
	}
	require.ErrorIs(t, err, want)
	assert.Contains(t, err.Error(), path)
	assert.Contains(t, err.Error(), "restore it from a backup")
	assert.Contains(t, err.Error(), MarkerPath(path))
}

// TestOpenRefusesDamagedStore: a store file cut to 0 bytes or shortened,
// or with a page in its middle zeroed or overwritten, is refused with an
// error naming the file and what to do; Open never panics and never starts
// empty.
func TestOpenRefusesDamagedStore(t *testing.T) {
	cases := map[string]func(t *testing.T, path string){
		"truncated to 0 bytes": func(t *testing.T, path string) { require.NoError(t, os.Truncate(path, 0)) },
		"truncated":            func(t *testing.T, path string) { require.NoError(t, os.Truncate(path, 3*4096)) },
		"zeroed middle page":   overwriteMiddlePage(make([]byte, 4096)),
		"random middle page": overwriteMiddlePage(func() []byte {
			b := make([]byte, 4096)
			for i := range b {
				b[i] = byte(i*7 + 3)
			}
			return b
		}()),
	}
	for name, damage := range cases {
		t.Run(name, func(t *testing.T) {
			path := heldStore(t, 300)
			damage(t, path)
			assertRefused(t, path, ErrCorrupt)
		})
	}
}

func overwriteMiddlePage(content []byte) func(t *testing.T, path string) {
	return func(t *testing.T, path string) {
		fi, err := os.Stat(path)
		require.NoError(t, err)
		f, err := os.OpenFile(path, os.O_WRONLY, 0)
		require.NoError(t, err)
		defer f.Close()
		_, err = f.WriteAt(content, (fi.Size()/4096/2)*4096)
		require.NoError(t, err)
	}
}

// TestOpenRefusesMissingStoreThatHeldData: once a store was opened, its
// marker file stays beside it, and a missing store file is refused rather
// than replaced by an empty one; without the marker a new store is made.
func TestOpenRefusesMissingStoreThatHeldData(t *testing.T) {
	path := heldStore(t, 1)
	assert.FileExists(t, MarkerPath(path))
	require.NoError(t, os.Remove(path))
	assertRefused(t, path, ErrMissing)
	_, err := os.Stat(path)
	require.ErrorIs(t, err, os.ErrNotExist, "the refusal creates no file")

	require.NoError(t, os.Remove(MarkerPath(path)))
	s, err := Open(path, Options{})
	require.NoError(t, err, "an operator who removed the marker starts empty on purpose")
	require.NoError(t, s.Close())
}

// TestOpenWritesMarkerForExistingStore: a store made before markers gets
// one at its next open.
func TestOpenWritesMarkerForExistingStore(t *testing.T) {
	path := heldStore(t, 1)
	require.NoError(t, os.Remove(MarkerPath(path)))
	s, err := Open(path, Options{})
	require.NoError(t, err)
	require.NoError(t, s.Close())
	assert.FileExists(t, MarkerPath(path))
}
