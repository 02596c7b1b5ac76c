package replica

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/edgeset/edgeset/controller/store"
)

// progressEvery paces Restore's progress logs.
const progressEvery = 2 * time.Second

// restoreStats is what a restore read, for its log.
type restoreStats struct {
	keys  int   // etcd keys read
	bytes int64 // their keys' and values' bytes
}

// Restore rebuilds the store file at path from etcd: it first finishes
// or discards what earlier terms left staged (through the fence), then
// reads the prefix at one revision, in pages, into a new bbolt file
// beside path, fsyncs it and renames it over path, replacing a stale
// cache; store.Open accepts the result (an empty prefix gives an empty
// file, which Open initializes and replicates). The store at path must
// be closed. Options.Log hears of a long restore's progress. Restore also
// ends ErrDiverged.
func (r *Replica) Restore(ctx context.Context, path string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.recovered = false
	if err := r.recoverLocked(ctx); err != nil {
		return fmt.Errorf("restore %s from etcd: %w", path, err)
	}
	if err := r.rebuild(ctx, path); err != nil {
		return fmt.Errorf("restore %s from etcd %s: %w", path, r.layout.prefix, err)
	}
	r.diverged = nil
	return nil
}

// compactedRetries is how many times rebuild starts again when etcd
// compacted the revision it was reading at.
const compactedRetries = 3

// rebuild writes etcd's store into a temporary file and renames it over
// path. A read that etcd's compaction overtook starts again.
func (r *Replica) rebuild(ctx context.Context, path string) error {
	removeStale(path)
	for attempt := 1; ; attempt++ {
		err := r.rebuildOnce(ctx, path)
		if !errors.Is(err, rpctypes.ErrCompacted) || attempt == compactedRetries {
			return err
		}
		r.opts.Log.Warn("etcd compacted the revision being restored; starting again", "attempt", attempt)
	}
}

func (r *Replica) rebuildOnce(ctx context.Context, path string) error {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, filepath.Base(path)+restoreSuffix+"*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	if err := f.Close(); err != nil {
		return err
	}
	err = r.fill(ctx, tmp)
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		_ = os.Remove(tmp)
		return err
	}
	return syncDir(dir)
}

// restoreSuffix marks Restore's temporary files beside the store.
const restoreSuffix = ".restore-"

// removeStale removes the temporary files of restores killed mid-way.
func removeStale(path string) {
	stale, _ := filepath.Glob(path + restoreSuffix + "*")
	for _, f := range stale {
		_ = os.Remove(f)
	}
}

// fill writes every bucket, sequence and key under the prefix into the
// new bbolt file tmp, one bbolt transaction per page, and fsyncs it once
// at the end.
func (r *Replica) fill(ctx context.Context, tmp string) error {
	db, err := bbolt.Open(tmp, 0o600, &bbolt.Options{Timeout: time.Second, NoSync: true})
	if err != nil {
		return fmt.Errorf("open %s: %w", tmp, err)
	}
	var st restoreStats
	start, last := time.Now(), time.Now()
	rev, err := r.scan(ctx, r.layout.root(), nil, func(page []*kvPair) error {
		if err := db.Update(func(tx *bbolt.Tx) error { return r.fillPage(tx, page) }); err != nil {
			return err
		}
		for _, kv := range page {
			st.keys++
			st.bytes += int64(len(kv.key) + len(kv.value))
		}
		if time.Since(last) >= progressEvery {
			last = time.Now()
			r.opts.Log.Info("restoring store from etcd", "keys", st.keys, "bytes", st.bytes, "elapsed", time.Since(start).Round(time.Millisecond))
		}
		return nil
	})
	if err == nil {
		err = db.Sync()
	}
	if cerr := db.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("close %s: %w", tmp, cerr)
	}
	if err == nil {
		r.opts.Log.Info("store restored from etcd", "keys", st.keys, "bytes", st.bytes, "revision", rev,
			"elapsed", time.Since(start).Round(time.Millisecond))
	}
	return err
}

// fillPage writes one page of etcd keys, in key order: a bucket's
// existence key sorts before its sequence, nested buckets and keys.
func (r *Replica) fillPage(tx *bbolt.Tx, page []*kvPair) error {
	c := bucketCache{tx: tx}
	for _, kv := range page {
		e, err := r.layout.parse(kv.key)
		if err != nil {
			return err
		}
		if err := c.apply(e, kv.value); err != nil {
			return fmt.Errorf("etcd key %q: %w", kv.key, err)
		}
	}
	return nil
}

// bucketCache finds the buckets of one bbolt transaction by path,
// remembering the last one (keys come bucket by bucket).
type bucketCache struct {
	tx       *bbolt.Tx
	lastPath string
	last     *bbolt.Bucket
}

func (c *bucketCache) apply(e entry, value []byte) error {
	if e.kind == entryBucket {
		parent, err := c.bucket(e.path[:len(e.path)-1])
		if err != nil {
			return err
		}
		name := []byte(e.path[len(e.path)-1])
		if parent == nil {
			_, err = c.tx.CreateBucketIfNotExists(name)
		} else {
			_, err = parent.CreateBucketIfNotExists(name)
		}
		return err
	}
	b, err := c.bucket(e.path)
	if err != nil {
		return err
	}
	switch e.kind {
	case entrySeq:
		if len(value) != 8 {
			return fmt.Errorf("sequence of %d bytes, want 8", len(value))
		}
		return b.SetSequence(binary.BigEndian.Uint64(value))
	default:
		if value == nil {
			value = []byte{}
		}
		return b.Put(e.key, value)
	}
}

// bucket returns the bucket at path, nil for the root; a missing one is
// an error (its existence key should have come first).
func (c *bucketCache) bucket(path []string) (*bbolt.Bucket, error) {
	if len(path) == 0 {
		return nil, nil
	}
	joined := strings.Join(path, "\x00")
	if c.last != nil && c.lastPath == joined {
		return c.last, nil
	}
	b := c.tx.Bucket([]byte(path[0]))
	for _, name := range path[1:] {
		if b == nil {
			break
		}
		b = b.Bucket([]byte(name))
	}
	if b == nil {
		return nil, fmt.Errorf("bucket %s has no existence key in etcd", strings.Join(path, "/"))
	}
	c.lastPath, c.last = joined, b
	return b, nil
}

// Seed copies the store file at path (a single-node controller's, not
// open elsewhere) into etcd under prefix, which must be empty: the
// migration of a single-node store to HA. It writes through f, as one
// atomic commit (staged: a whole store exceeds one transaction), and
// fails with ErrNotEmpty when the prefix holds anything.
func Seed(ctx context.Context, cli *clientv3.Client, prefix string, f Fence, path string) error {
	r := New(cli, prefix, f, Options{})
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.checkEmpty(ctx); err != nil {
		return fmt.Errorf("seed etcd %s from %s: %w", r.layout.prefix, path, err)
	}
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{ReadOnly: true, Timeout: time.Second})
	if errors.Is(err, berrors.ErrTimeout) {
		return fmt.Errorf("seed etcd %s from %s: the file is locked: stop the controller that holds it: %w", r.layout.prefix, path, err)
	}
	if err != nil {
		return fmt.Errorf("seed etcd %s from %s: open: %w", r.layout.prefix, path, err)
	}
	defer db.Close()
	err = db.View(func(tx *bbolt.Tx) error {
		ws, err := snapshot(tx)
		if err != nil {
			return err
		}
		effects, err := reduce(r.layout, ws)
		if err != nil {
			return err
		}
		root := r.layout.root()
		empty := clientv3.Compare(clientv3.CreateRevision(root), "=", 0).WithRange(prefixEnd(root))
		return r.commitLocked(ctx, effects, []clientv3.Cmp{empty})
	})
	if errors.Is(err, errCompare) {
		err = fmt.Errorf("%w (written meanwhile)", ErrNotEmpty)
	}
	if err != nil {
		return fmt.Errorf("seed etcd %s from %s: %w", r.layout.prefix, path, err)
	}
	return nil
}

// checkEmpty fails with ErrNotEmpty when anything is under the prefix.
func (r *Replica) checkEmpty(ctx context.Context) error {
	resp, err := r.get(ctx, r.layout.prefix+"/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		return err
	}
	if resp.Count > 0 {
		return fmt.Errorf("%w: %d keys under %s/", ErrNotEmpty, resp.Count, r.layout.prefix)
	}
	return nil
}

// snapshot is the write set that builds tx's whole file from nothing:
// every bucket, its sequence and its keys, in order.
func snapshot(tx *bbolt.Tx) (*store.WriteSet, error) {
	ws := &store.WriteSet{}
	var walk func(path []string, b *bbolt.Bucket) error
	walk = func(path []string, b *bbolt.Bucket) error {
		ws.Ops = append(ws.Ops, store.Op{Kind: store.OpCreateBucket, Bucket: path})
		if seq := b.Sequence(); seq != 0 {
			ws.Ops = append(ws.Ops, store.Op{Kind: store.OpSetSequence, Bucket: path, Seq: seq})
		}
		return b.ForEach(func(k, v []byte) error {
			if v == nil {
				return walk(append(path[:len(path):len(path)], string(k)), b.Bucket(k))
			}
			ws.Ops = append(ws.Ops, store.Op{Kind: store.OpPut, Bucket: path, Key: k, Value: v})
			return nil
		})
	}
	err := tx.ForEach(func(name []byte, b *bbolt.Bucket) error { return walk([]string{string(name)}, b) })
	return ws, err
}

// syncDir fsyncs a directory so that a rename in it survives a power cut.
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
