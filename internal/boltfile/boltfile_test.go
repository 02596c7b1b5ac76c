package boltfile

import (
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// damagedFiles are ways a bbolt file can be unreadable. The truncated ones
// make bbolt panic or read its mapping past the end of the file (SIGBUS),
// depending on where the cut falls.
func damagedFiles() map[string]func(t *testing.T, path string) {
	random := make([]byte, 64<<10)
	_, _ = rand.Read(random)
	files := map[string]func(t *testing.T, path string){
		"random bytes": writeBytes(random),
		"short text":   writeBytes([]byte("hello, not a database\n")),
		"zero page":    writeBytes(make([]byte, 4096)),
		"zero pages":   writeBytes(make([]byte, 64<<10)),
	}
	for _, size := range []int64{4096, 8192, 12288, 16384} {
		files[fmt.Sprintf("truncated to %d", size)] = writeTruncated(size)
	}
	// Damage in the middle of the file that opening alone does not read;
	// bbolt panics ("assertion failed: Page expected to be: ...") when a
	// later read reaches it.
	page := make([]byte, 4096)
	_, _ = rand.Read(page)
	files["zeroed middle page"] = writeOverwritten(make([]byte, 4096))
	files["random middle page"] = writeOverwritten(page)
	return files
}

// writeOverwritten writes a database of a few hundred keys and replaces
// a page in the middle of it with content.
func writeOverwritten(content []byte) func(*testing.T, string) {
	return func(t *testing.T, path string) {
		writeTruncated(-1)(t, path)
		fi, err := os.Stat(path)
		require.NoError(t, err)
		f, err := os.OpenFile(path, os.O_WRONLY, 0)
		require.NoError(t, err)
		defer f.Close()
		off := (fi.Size() / 4096 / 2) * 4096
		_, err = f.WriteAt(content, off)
		require.NoError(t, err)
	}
}

func writeBytes(b []byte) func(*testing.T, string) {
	return func(t *testing.T, path string) { require.NoError(t, os.WriteFile(path, b, 0o600)) }
}

// writeTruncated writes a database of a few hundred keys and cuts it to
// size (not when size is negative).
func writeTruncated(size int64) func(*testing.T, string) {
	return func(t *testing.T, path string) {
		db, err := bbolt.Open(path, 0o600, nil)
		require.NoError(t, err)
		for i := range 40 {
			require.NoError(t, db.Update(func(tx *bbolt.Tx) error {
				b, err := tx.CreateBucketIfNotExists([]byte("b"))
				if err != nil {
					return err
				}
				for j := range 10 {
					if err := b.Put(fmt.Appendf(nil, "key-%d-%d", i, j), make([]byte, 200)); err != nil {
						return err
					}
				}
				return nil
			}))
		}
		require.NoError(t, db.Close())
		if size >= 0 {
			require.NoError(t, os.Truncate(path, size))
		}
	}
}

func TestOpenDamaged(t *testing.T) {
	for name, write := range damagedFiles() {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "x.db")
			write(t, path)
			db, err := Open(path, bbolt.Options{Timeout: time.Second})
			if err == nil {
				_ = db.Close()
			}
			require.ErrorIs(t, err, ErrDamaged)

			// The lock was released: the same answer again, not a timeout.
			_, err = Open(path, bbolt.Options{Timeout: 100 * time.Millisecond})
			assert.ErrorIs(t, err, ErrDamaged)
			assert.NotErrorIs(t, err, berrors.ErrTimeout)
		})
	}
}

func TestOpenOtherFailuresAreNotDamage(t *testing.T) {
	dir := t.TempDir()
	_, err := Open(filepath.Join(dir, "missing", "x.db"), bbolt.Options{})
	var pathErr *fs.PathError
	assert.ErrorAs(t, err, &pathErr)
	assert.NotErrorIs(t, err, ErrDamaged)

	path := filepath.Join(dir, "x.db")
	held, err := Open(path, bbolt.Options{})
	require.NoError(t, err)
	defer held.Close()
	_, err = Open(path, bbolt.Options{Timeout: 50 * time.Millisecond})
	assert.ErrorIs(t, err, berrors.ErrTimeout)
	assert.NotErrorIs(t, err, ErrDamaged)
}

func TestOpenOrSetAside(t *testing.T) {
	for name, write := range damagedFiles() {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "x.db")
			write(t, path)
			before, err := os.ReadFile(path)
			require.NoError(t, err)

			db, setAside, err := OpenOrSetAside(path, bbolt.Options{Timeout: time.Second})
			require.NoError(t, err)
			require.NotEmpty(t, setAside)
			kept, err := os.ReadFile(setAside)
			require.NoError(t, err)
			assert.Equal(t, before, kept, "the damaged file is kept unchanged")
			require.NoError(t, db.Update(func(tx *bbolt.Tx) error {
				_, err := tx.CreateBucket([]byte("fresh"))
				return err
			}), "the new file is a working database")
			require.NoError(t, db.Close())
		})
	}

	t.Run("readable file stays", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "x.db")
		db, setAside, err := OpenOrSetAside(path, bbolt.Options{})
		require.NoError(t, err)
		assert.Empty(t, setAside)
		require.NoError(t, db.Close())
		db, setAside, err = OpenOrSetAside(path, bbolt.Options{})
		require.NoError(t, err)
		assert.Empty(t, setAside)
		require.NoError(t, db.Close())
		matches, _ := filepath.Glob(path + ".damaged-*")
		assert.Empty(t, matches)
	})

	t.Run("a lock is not damage", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "x.db")
		held, err := Open(path, bbolt.Options{})
		require.NoError(t, err)
		defer held.Close()
		_, setAside, err := OpenOrSetAside(path, bbolt.Options{Timeout: 50 * time.Millisecond})
		assert.True(t, errors.Is(err, berrors.ErrTimeout), "err = %v", err)
		assert.Empty(t, setAside)
	})
}

// TestOpenNamesTruncation: a file cut short is reported as truncated,
// with both sizes, wherever the cut falls: also where bbolt itself fails
// to open it (the freelist page cut off), not only where it opens and the
// size check after it finds the missing pages.
func TestOpenNamesTruncation(t *testing.T) {
	for _, size := range []int64{4096, 8192, 12288, 16384, 65536} {
		t.Run(fmt.Sprint(size), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "x.db")
			writeTruncated(size)(t, path)
			_, err := Open(path, bbolt.Options{Timeout: time.Second})
			require.ErrorIs(t, err, ErrDamaged)
			assert.Contains(t, err.Error(), fmt.Sprintf("truncated: the file has %d bytes", size))
		})
	}
}
