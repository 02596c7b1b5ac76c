// Package boltfile opens bbolt files without letting a damaged one crash
// the process. bbolt trusts its file: on a truncated or overwritten one it
// may return an error, panic, or read its memory mapping past the end of
// the file, which faults (SIGBUS) and would kill the whole program. Open
// turns all three into ErrDamaged, and checks every page at open (see
// Check) so that damage in the middle of the file is found then, not by
// the first read that reaches it. OpenOrSetAside is for files that only
// cache state kept elsewhere (the agent's desired state, the broker's
// retained messages): it moves a damaged file aside, keeping it for a
// post-mortem, and starts a new one.
package boltfile

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"io/fs"
	"os"
	"runtime/debug"
	"time"

	"go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// ErrDamaged: the file is not a readable bbolt database.
var ErrDamaged = errors.New("damaged or not a bbolt database")

// Open opens (creating, mode 0600) the bbolt file at path. A lock held by
// another process past opts.Timeout is bbolt's ErrTimeout, and the
// operating system's refusals (missing directory, permissions) are
// *fs.PathError; every other failure comes from the file's content and is
// ErrDamaged. Errors do not repeat path, except the operating system's.
// After a panic or fault the lock bbolt took is released, so
// the file can be opened again; the mapping bbolt made stays until the
// process exits.
func Open(path string, opts bbolt.Options) (db *bbolt.DB, err error) {
	var file *os.File
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			if file != nil {
				releaseFile(file)
			}
			db, err = nil, fmt.Errorf("%w: bbolt: %v", ErrDamaged, r)
			if cut := truncation(path); cut != nil {
				err = cut
			}
		}
	}()
	openFile := opts.OpenFile
	if openFile == nil {
		openFile = os.OpenFile
	}
	opts.OpenFile = func(name string, flag int, perm os.FileMode) (*os.File, error) {
		f, err := openFile(name, flag, perm)
		file = f
		return f, err
	}
	db, err = bbolt.Open(path, 0o600, &opts)
	var pathErr *fs.PathError
	switch {
	case err == nil:
		if err := checkSize(db); err != nil {
			_ = db.Close()
			return nil, err
		}
		if err := Check(db); err != nil {
			_ = db.Close()
			return nil, err
		}
		return db, nil
	case errors.Is(err, berrors.ErrTimeout), errors.As(err, &pathErr):
		return nil, err
	default:
		if cut := truncation(path); cut != nil {
			return nil, cut
		}
		return nil, fmt.Errorf("%w: %w", ErrDamaged, err)
	}
}

// truncation reads the file's meta pages and, when the newest valid one
// says the committed pages reach past the end of the file, returns the
// ErrDamaged that checkSize would: bbolt fails to open many truncated
// files with whatever it reads past the end (an invalid freelist page, a
// file too small), which hides the cause. It returns nil when it cannot
// tell.
func truncation(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil
	}
	first, ok := readMeta(f, 0)
	pageSize := int64(os.Getpagesize())
	if ok {
		pageSize = int64(first.pageSize)
	}
	newest := first
	if second, ok2 := readMeta(f, pageSize); ok2 && (!ok || second.txid > first.txid) {
		newest, ok = second, true
	}
	if reach := int64(newest.pgid) * int64(newest.pageSize); ok && reach > fi.Size() {
		return fmt.Errorf("%w: truncated: the file has %d bytes, its pages reach %d", ErrDamaged, fi.Size(), reach)
	}
	return nil
}

// meta is the part of a bbolt meta page truncation needs.
type meta struct {
	pageSize uint32
	pgid     uint64 // high-water mark: pages committed
	txid     uint64
}

// readMeta decodes the meta page at off (bbolt's file format 2: a 16-byte
// page header, then magic, version, page size, flags, root bucket,
// freelist, pgid, txid and an FNV-64a checksum of what precedes it, in
// the machine's byte order, little-endian on every target edgeset ships).
// ok is false unless magic, version and checksum are right.
func readMeta(f *os.File, off int64) (m meta, ok bool) {
	const header, sumAt = 16, 56
	buf := make([]byte, header+sumAt+8)
	if _, err := f.ReadAt(buf, off); err != nil {
		return meta{}, false
	}
	b := buf[header:]
	le := binary.LittleEndian
	h := fnv.New64a()
	_, _ = h.Write(b[:sumAt])
	if le.Uint32(b[0:]) != 0xED0CDAED || le.Uint32(b[4:]) != 2 || h.Sum64() != le.Uint64(b[sumAt:]) {
		return meta{}, false
	}
	return meta{pageSize: le.Uint32(b[8:]), pgid: le.Uint64(b[40:]), txid: le.Uint64(b[48:])}, true
}

// checkSize fails with ErrDamaged when the file is shorter than the pages
// its last transaction committed: bbolt opens such a truncated file, and
// reading one of the missing pages would fault.
func checkSize(db *bbolt.DB) error {
	fi, err := os.Stat(db.Path())
	if err != nil {
		return err
	}
	return db.View(func(tx *bbolt.Tx) error {
		if tx.Size() > fi.Size() {
			return fmt.Errorf("%w: truncated: the file has %d bytes, its pages reach %d", ErrDamaged, fi.Size(), tx.Size())
		}
		return nil
	})
}

// maxCheckErrors bounds the problems Check reports.
const maxCheckErrors = 5

// Check reads every page the file's buckets reach, keys, values and nested
// buckets, and then runs bbolt's consistency check (tx.Check: every page
// either reachable or free, none freed twice), failing with ErrDamaged and
// up to maxCheckErrors problems. It reads the whole tree, so its cost
// grows with the file (docs/operations.md gives figures). The walk comes
// first and in the caller's goroutine, where Open recovers bbolt's panics
// and faults on a garbage page; tx.Check, which runs in a goroutine of its
// own, then only meets pages the walk read. The caller recovers panics
// (Open does).
func Check(db *bbolt.DB) error {
	return db.View(func(tx *bbolt.Tx) error {
		if err := tx.ForEach(func(name []byte, b *bbolt.Bucket) error { return walk(b) }); err != nil {
			return fmt.Errorf("%w: %w", ErrDamaged, err)
		}
		var problems []error
		for err := range tx.Check() {
			if len(problems) < maxCheckErrors {
				problems = append(problems, err)
			}
		}
		if len(problems) > 0 {
			return fmt.Errorf("%w: consistency check: %w", ErrDamaged, errors.Join(problems...))
		}
		return nil
	})
}

// walk reads every key and value of b and of its nested buckets. Reading
// each value's last byte touches its overflow pages.
func walk(b *bbolt.Bucket) error {
	c := b.Cursor()
	var sink byte
	for k, v := c.First(); k != nil; k, v = c.Next() {
		if v == nil {
			if nested := b.Bucket(k); nested != nil {
				if err := walk(nested); err != nil {
					return err
				}
			}
			continue
		}
		if len(v) > 0 {
			sink ^= v[len(v)-1]
		}
	}
	_ = sink
	return nil
}

// OpenOrSetAside opens path like Open; if the file is damaged it renames it
// to path.damaged-TIMESTAMP and opens a new, empty file in its place.
// setAside is the name the damaged file now has, or "" when it was
// readable.
func OpenOrSetAside(path string, opts bbolt.Options) (db *bbolt.DB, setAside string, err error) {
	db, err = Open(path, opts)
	if !errors.Is(err, ErrDamaged) {
		return db, "", err
	}
	damaged := err
	if setAside, err = SetAside(path); err != nil {
		return nil, "", fmt.Errorf("%w; %w", damaged, err)
	}
	if db, err = Open(path, opts); err != nil {
		return nil, setAside, fmt.Errorf("new file in place of the damaged one: %w", err)
	}
	return db, setAside, nil
}

// SetAside renames the (closed) damaged file at path to
// path.damaged-TIMESTAMP, where it stays for a post-mortem, and returns
// the new name.
func SetAside(path string) (string, error) {
	aside := path + ".damaged-" + time.Now().UTC().Format("20060102T150405.000000000Z")
	if err := os.Rename(path, aside); err != nil {
		return "", fmt.Errorf("move damaged file aside: %w", err)
	}
	return aside, nil
}
