package store

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"github.com/edgeset/edgeset/internal/boltfile"
)

// Defaults applied by Open to zero Options fields.
const (
	DefaultLockTimeout = 2 * time.Second
	DefaultMaxEvents   = 10000
)

// Errors returned by the store, always wrapped with the file and what was
// being done; test them with errors.Is.
var (
	// ErrLocked: another process (probably another edgeset-controller)
	// holds the store file's lock.
	ErrLocked = errors.New("store file is locked")
	// ErrCorrupt: the file is not a readable edgeset store (damaged, not a
	// bbolt file, or a bbolt file of another program).
	ErrCorrupt = errors.New("store file is corrupt or not an edgeset store")
	// ErrNewerSchema: the file was written by a newer edgeset whose schema
	// this binary does not know.
	ErrNewerSchema = errors.New("store schema is newer than this edgeset")
	// ErrMissing: the store file is gone, but its marker file says that
	// it held a store.
	ErrMissing = errors.New("store file is missing")
	// ErrNotFound: no record under the key.
	ErrNotFound = errors.New("not found")
	// ErrStaleGeneration: a desired record's explicit generation is not
	// above the node's high-water mark.
	ErrStaleGeneration = errors.New("desired generation not above the node's last generation")
	// ErrClosed: the store has been closed.
	ErrClosed = errors.New("store is closed")
	// ErrBehind: Options.Replicate took a write that the file then failed
	// to commit, so the replica holds more than the file; the store
	// refuses writes until it is rebuilt from the replica.
	ErrBehind = errors.New("store file is behind its replica")
)

// Options tune Open. The zero value is valid.
type Options struct {
	// LockTimeout bounds the wait for the file lock; zero means
	// DefaultLockTimeout.
	LockTimeout time.Duration
	// MaxEvents bounds the events bucket; the oldest events are trimmed in
	// the transaction that appends past it. Zero or less means
	// DefaultMaxEvents.
	MaxEvents int
	// MaxNodeEvents bounds the node-caused events (Event.Source set)
	// together: past it the oldest node-caused event is trimmed, and the
	// controller's own events keep at least MaxEvents-MaxNodeEvents places
	// (see Trimmed). Zero or less means half of MaxEvents; more than
	// MaxEvents means MaxEvents.
	MaxNodeEvents int
	// OnWrite, when set, is told the outcome of every read-write
	// transaction that tried to commit: nil once it committed, else why
	// the file could not take it (disk full, I/O error). A transaction
	// whose own logic refused the write (not found, stale generation,
	// nothing to write, a dry run) is not reported: it says nothing about
	// the disk. OnWrite must not call the store.
	OnWrite func(err error)
	// Replicate, when set, is handed the write set of every read-write
	// transaction that wrote anything (Open's migrations included), after
	// the transaction's function succeeded and before bbolt commits; the
	// commit happens only when it returns nil. Its error rolls the
	// transaction back and is returned, wrapped, by the method that wrote
	// (errors.Is sees through). Should bbolt's commit fail after Replicate
	// took the write set, every later write fails with ErrBehind: the
	// file must be rebuilt from the replica. Replicate's ctx does not end:
	// it bounds its own requests. Calls come one at a time, in commit order:
	// with Replicate set, concurrent writes that bbolt would coalesce into
	// one transaction each get their own. Replicate must not call the
	// store.
	Replicate Replicator
	// SecretCipher, when set, encrypts every Secret record the store
	// writes and decrypts those it reads (secrets.go); records written
	// in the clear before are still read. Nil writes them in the clear.
	SecretCipher SecretCipher
}

func (o Options) withDefaults() Options {
	if o.LockTimeout <= 0 {
		o.LockTimeout = DefaultLockTimeout
	}
	if o.MaxEvents <= 0 {
		o.MaxEvents = DefaultMaxEvents
	}
	if o.MaxNodeEvents <= 0 {
		o.MaxNodeEvents = max(1, o.MaxEvents/2)
	}
	o.MaxNodeEvents = min(o.MaxNodeEvents, o.MaxEvents)
	return o
}

// Store is the controller's bbolt-backed state. Its methods are safe for
// concurrent use; each runs in its own transaction.
type Store struct {
	path      string
	db        *bbolt.DB
	maxEvents int
	onWrite   func(error)
	replicate Replicator
	fault     atomic.Pointer[func() error]
	// behind, once set, is why the file lacks a write its replicator took.
	behind atomic.Pointer[error]

	closeOnce sync.Once
	closeErr  error

	// maxNodeEvents bounds the node-caused events (Options.MaxNodeEvents).
	maxNodeEvents int
	// secrets encrypts Secret records (Options.SecretCipher); nil: clear.
	secrets SecretCipher
}

// What an operator does about a damaged or a missing store; %s is the
// marker file.
const (
	restoreHint = "restore it from a backup (edgeset-controller backup; docs/operations.md, " +
		"\"Backing up and restoring the store\"), or move it aside (and remove %s) to start with an empty store"
	restoreMissingHint = "restore it from a backup (edgeset-controller backup; docs/operations.md, " +
		"\"Backing up and restoring the store\"), or remove %s to start with an empty store"
)

// Open opens the store at path, creating the file (mode 0600) and its
// buckets if needed and applying pending schema migrations. It fails with
// ErrLocked if another process holds the file for longer than
// opts.LockTimeout, ErrCorrupt if the file is unreadable, empty or fails
// the consistency check of every page (boltfile.Check), ErrNewerSchema if
// a newer edgeset wrote it, and ErrMissing if the file is gone but its
// marker (MarkerPath) says it held a store: once a store has been opened,
// Open never silently starts an empty one in its place.
func Open(path string, opts Options) (*Store, error) {
	opts = opts.withDefaults()
	fi, statErr := os.Stat(path)
	created := errors.Is(statErr, os.ErrNotExist)
	if err := checkPresent(path, fi, created); err != nil {
		return nil, err
	}
	db, err := boltfile.Open(path, bbolt.Options{Timeout: opts.LockTimeout,
		// bbolt writes its whole freelist with every commit and merges it
		// into a new array on every release, both by default: once a
		// fleet-wide write has freed many pages (100,000 desired states
		// replaced free some 100,000 pages), each small commit after it (a
		// node event, the event sink's flush) allocated and wrote about
		// 0.8 MB for them. Unsynced, the freelist is rebuilt at open by the
		// scan of every page (Check reads them all anyway), as etcd and
		// containerd do; the map freelist releases pages without merging.
		NoFreelistSync: true,
		FreelistType:   bbolt.FreelistMapType,
	})
	if err != nil {
		return nil, openError(path, opts.LockTimeout, err)
	}
	if err := migrateSafely(db, opts.Replicate); err != nil {
		_ = db.Close()
		if errors.Is(err, ErrCorrupt) {
			return nil, fmt.Errorf("open store %s: %w; "+restoreHint, path, err, MarkerPath(path))
		}
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	if err := writeMarker(path, created); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	return &Store{path: path, db: db, maxEvents: opts.MaxEvents, maxNodeEvents: opts.MaxNodeEvents, onWrite: opts.OnWrite,
		replicate: opts.Replicate, secrets: opts.SecretCipher}, nil
}

// MarkerPath is the marker file beside the store at path, written once the
// store has been opened: while it exists, a missing store file is an
// error, not a first start.
func MarkerPath(path string) string { return path + ".held" }

// checkPresent refuses a store file that is gone while its marker says
// it held a store, and an empty one: bbolt would make either a new, empty
// store.
func checkPresent(path string, fi os.FileInfo, missing bool) error {
	marker := MarkerPath(path)
	switch {
	case missing:
		if _, err := os.Stat(marker); err == nil {
			return fmt.Errorf("open store %s: %w, but %s says this data directory held a store; "+restoreMissingHint,
				path, ErrMissing, marker, marker)
		}
	case fi != nil && fi.Mode().IsRegular() && fi.Size() == 0:
		return fmt.Errorf("open store %s: %w: the file is empty (0 bytes); "+restoreHint, path, ErrCorrupt, marker)
	}
	return nil
}

// writeMarker writes the store's marker file if it is missing, and
// fsyncs the directory when it or the store file is new.
func writeMarker(path string, created bool) error {
	marker := MarkerPath(path)
	if _, err := os.Stat(marker); err == nil {
		if created {
			return syncDir(filepath.Dir(path))
		}
		return nil
	}
	text := fmt.Sprintf("This file records that %s held the edgeset controller's store.\n"+
		"While it exists, edgeset-controller refuses to start without that file instead of starting empty.\n"+
		"Remove it only to start with an empty store on purpose.\n", filepath.Base(path))
	f, err := os.OpenFile(marker, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err == nil {
		_, err = f.WriteString(text)
		err = errors.Join(err, f.Sync(), f.Close())
	}
	if err != nil {
		return fmt.Errorf("write marker %s: %w", marker, err)
	}
	return syncDir(filepath.Dir(path))
}

// openError explains why bbolt.Open failed. Beyond a lock timeout and the
// operating system's refusals (missing directory, permissions), bbolt fails
// only on the file's content: invalid meta pages, checksums, sizes.
func openError(path string, timeout time.Duration, err error) error {
	var pathErr *fs.PathError
	switch {
	case errors.Is(err, berrors.ErrTimeout):
		return fmt.Errorf("open store %s: %w after %s: another edgeset-controller probably holds it",
			path, ErrLocked, timeout)
	case errors.As(err, &pathErr):
		return fmt.Errorf("open store %s: %w", path, err)
	default:
		return fmt.Errorf("open store %s: %w: %w; "+restoreHint, path, ErrCorrupt, err, MarkerPath(path))
	}
}

// syncDir fsyncs a directory so that a file just created in it survives a
// power cut.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("sync directory %s: %w", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync directory %s: %w", dir, err)
	}
	return nil
}

// Path returns the store's file.
func (s *Store) Path() string { return s.path }

// Close releases the file and its lock. It waits for running transactions
// and is safe to call more than once; later calls return the first result.
// Other methods fail with ErrClosed afterwards.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		if err := s.db.Close(); err != nil {
			s.closeErr = fmt.Errorf("close store %s: %w", s.path, err)
		}
	})
	return s.closeErr
}

// view runs fn in a read-only transaction.
func (s *Store) view(fn func(tx *boltTx) error) error {
	return closedError(s.db.View(func(tx *bbolt.Tx) error { return fn(&boltTx{tx: tx}) }))
}

// errNoWrite ends an update that found nothing to change: the transaction
// rolls back instead of committing, sparing an fsync, and update returns
// nil.
var errNoWrite = errors.New("nothing to write")

// update runs fn in a read-write transaction, committed and fsynced before
// it returns.
func (s *Store) update(fn func(tx *boltTx) error) error {
	if behind := s.behind.Load(); behind != nil {
		return fmt.Errorf("store %s: %w (rebuild it from the replica): %w", s.path, ErrBehind, *behind)
	}
	w := s.writer(fn)
	err := s.db.Update(w.run)
	if err != nil && w.replicated {
		s.behind.Store(&err)
	}
	w.report(err)
	if errors.Is(err, errNoWrite) {
		return nil
	}
	return closedError(err)
}

// batch is update for writes that arrive concurrently at fleet rate: bbolt
// coalesces concurrent calls into one fsynced transaction. fn may run more
// than once and must be idempotent. With Options.Replicate it is update:
// bbolt's Batch has no point between its calls and its commit at which the
// combined write set could be replicated, and it reruns a failed call.
func (s *Store) batch(fn func(tx *boltTx) error) error {
	if s.replicate != nil {
		return s.update(fn)
	}
	w := s.writer(fn)
	err := s.db.Batch(w.run)
	w.report(err)
	return closedError(err)
}

// Probe commits a write that leaves nothing behind (a key put and removed
// in the meta bucket), so that a caller learns through Options.OnWrite,
// and its error, whether the file takes writes again.
func (s *Store) Probe() error {
	return s.update(func(tx *boltTx) error {
		b, err := bucket(tx, bucketMeta)
		if err != nil {
			return err
		}
		key := []byte("probe")
		if err := b.Put(key, make([]byte, 4096)); err != nil {
			return err
		}
		return b.Delete(key)
	})
}

// FailWrites makes every later read-write transaction call fault once its
// writes are made (and replicated, with Options.Replicate) and, when fault
// returns an error, roll back and fail with it as a commit that the disk
// refused would: the seam tests use to stand in for a full or failing
// disk. nil removes it.
func (s *Store) FailWrites(fault func() error) {
	if fault == nil {
		s.fault.Store(nil)
		return
	}
	s.fault.Store(&fault)
}

// writer runs one read-write transaction's function and tells OnWrite
// how the commit went, telling apart the function's own refusals from
// the file's.
type writer struct {
	s     *Store
	fn    func(tx *boltTx) error
	ran   bool
	fnErr error
	// replicated: Replicate took the last run's write set.
	replicated bool
}

func (s *Store) writer(fn func(tx *boltTx) error) *writer { return &writer{s: s, fn: fn} }

// run runs fn, then the replicator, then the injected fault.
func (w *writer) run(tx *bbolt.Tx) (err error) {
	w.ran, w.fnErr = true, nil
	fn := func(t *boltTx) error {
		w.fnErr = w.fn(t)
		return w.fnErr
	}
	w.replicated, err = runRecorded(tx, w.s.replicate, fn, w.fault)
	return err
}

func (w *writer) fault() error {
	if fault := w.s.fault.Load(); fault != nil {
		return (*fault)()
	}
	return nil
}

// report passes the transaction's outcome to OnWrite unless fn refused
// the write itself or never ran (the store is closed).
func (w *writer) report(err error) {
	if w.s.onWrite == nil || !w.ran || w.fnErr != nil {
		return
	}
	if err != nil {
		err = fmt.Errorf("write to %s: %w", w.s.path, err)
	}
	w.s.onWrite(err)
}

func closedError(err error) error {
	if errors.Is(err, berrors.ErrDatabaseNotOpen) {
		return ErrClosed
	}
	return err
}

// wrap prefixes err with the store file and the operation, or returns nil.
func (s *Store) wrap(err error, format string, args ...any) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("store %s: %s: %w", s.path, fmt.Sprintf(format, args...), err)
}
