package store

import (
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"github.com/edgeset/edgeset/internal/boltfile"
)

// Backup writes a consistent copy of the store to w, as of one read
// transaction, while the store keeps serving (bbolt's Tx.WriteTo). The copy
// is a complete store file: restoring is putting it in place of the
// store's file while no controller runs. started, when not nil, is told
// the copy's size before anything is written.
func (s *Store) Backup(w io.Writer, started func(size int64)) (int64, error) {
	var n int64
	err := s.view(func(tx *boltTx) (err error) {
		if started != nil {
			started(tx.tx.Size())
		}
		n, err = tx.tx.WriteTo(w)
		return err
	})
	return n, s.wrap(err, "backup")
}

// OpenReadOnly opens an existing store without writing to it, for an
// offline backup: the file must exist, pass the consistency check and be
// free of another process's exclusive lock (a running controller's), or it
// fails with ErrLocked.
func OpenReadOnly(path string, opts Options) (*Store, error) {
	opts = opts.withDefaults()
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	if err := checkPresent(path, fi, false); err != nil {
		return nil, err
	}
	db, err := boltfile.Open(path, bbolt.Options{ReadOnly: true, Timeout: opts.LockTimeout})
	if errors.Is(err, berrors.ErrTimeout) {
		return nil, fmt.Errorf("open store %s: %w after %s: edgeset-controller is probably running; back it up through its API",
			path, ErrLocked, opts.LockTimeout)
	}
	if err != nil {
		return nil, openError(path, opts.LockTimeout, err)
	}
	return &Store{path: path, db: db, maxEvents: opts.MaxEvents, maxNodeEvents: opts.MaxNodeEvents, secrets: opts.SecretCipher}, nil
}

// Verify opens the store file at path read-only, runs the consistency
// check and reads its schema version: what a restore would meet.
func Verify(path string) error {
	s, err := OpenReadOnly(path, Options{LockTimeout: time.Second})
	if err != nil {
		return err
	}
	defer s.Close()
	return s.wrap(s.view(func(tx *boltTx) error {
		v, err := schemaVersion(tx)
		switch {
		case err != nil:
			return err
		case v == 0:
			return fmt.Errorf("%w: no schema version: not an edgeset store", ErrCorrupt)
		case v > codeSchemaVersion:
			return fmt.Errorf("%w: schema version %d, this edgeset knows up to %d", ErrNewerSchema, v, codeSchemaVersion)
		}
		return nil
	}), "verify")
}
