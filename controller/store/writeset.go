package store

import (
	"context"
	"errors"
	"fmt"

	"go.etcd.io/bbolt"
)

// OpKind says what one Op of a write set did.
type OpKind uint8

// The kinds of Op.
const (
	// OpPut stored Value under Key in Bucket.
	OpPut OpKind = iota + 1
	// OpDelete removed Key from Bucket (it may not have been there).
	OpDelete
	// OpCreateBucket created Bucket, empty, with sequence 0.
	OpCreateBucket
	// OpDeleteBucket removed Bucket with everything under it: its keys,
	// its sequence and its nested buckets.
	OpDeleteBucket
	// OpSetSequence set Bucket's sequence to Seq.
	OpSetSequence
)

func (k OpKind) String() string {
	switch k {
	case OpPut:
		return "put"
	case OpDelete:
		return "delete"
	case OpCreateBucket:
		return "create-bucket"
	case OpDeleteBucket:
		return "delete-bucket"
	case OpSetSequence:
		return "set-sequence"
	}
	return fmt.Sprintf("OpKind(%d)", uint8(k))
}

// Op is one write of a read-write transaction. Bucket is the path of
// bucket names from the top level ("revisions", "default/web" for a
// nested one). Key and Value are set for OpPut, Key for OpDelete, Seq for
// OpSetSequence. Key and Value are the transaction's own slices: valid
// only during the call to Options.Replicate, which copies what it keeps.
type Op struct {
	Kind   OpKind
	Bucket []string
	Key    []byte
	Value  []byte
	Seq    uint64
}

// WriteSet is every write of one read-write transaction, in the order the
// transaction made them. Applied in order to the bbolt file the
// transaction started from, it makes the file the transaction commits.
type WriteSet struct {
	Ops []Op
}

// Replicator is Options.Replicate's type: it durably commits ws
// elsewhere, or fails.
type Replicator func(ctx context.Context, ws *WriteSet) error

func (w *WriteSet) add(op Op) {
	if w != nil {
		w.Ops = append(w.Ops, op)
	}
}

// boltTx is a bbolt transaction whose writes go through boltBucket, which
// records them in ws when it is set (replication on and the transaction
// read-write). Every store function reaches bbolt through it; reads pass
// straight through.
type boltTx struct {
	tx *bbolt.Tx
	ws *WriteSet
}

// Bucket returns the top-level bucket name, nil when there is none.
func (t *boltTx) Bucket(name []byte) *boltBucket {
	b := t.tx.Bucket(name)
	if b == nil {
		return nil
	}
	return &boltBucket{b: b, path: []string{string(name)}, ws: t.ws}
}

// CreateBucketIfNotExists returns the top-level bucket name, creating it.
func (t *boltTx) CreateBucketIfNotExists(name []byte) (*boltBucket, error) {
	if b := t.Bucket(name); b != nil {
		return b, nil
	}
	b, err := t.tx.CreateBucket(name)
	if err != nil {
		return nil, err
	}
	path := []string{string(name)}
	t.ws.add(Op{Kind: OpCreateBucket, Bucket: path})
	return &boltBucket{b: b, path: path, ws: t.ws}, nil
}

// hasBuckets reports whether the file holds any top-level bucket.
func (t *boltTx) hasBuckets() bool {
	k, _ := t.tx.Cursor().First()
	return k != nil
}

// boltBucket is a bbolt bucket that records its writes in ws (when set)
// under its path.
type boltBucket struct {
	b    *bbolt.Bucket
	path []string
	ws   *WriteSet
}

func (b *boltBucket) Get(key []byte) []byte                          { return b.b.Get(key) }
func (b *boltBucket) ForEach(fn func(k, v []byte) error) error       { return b.b.ForEach(fn) }
func (b *boltBucket) ForEachBucket(fn func(name []byte) error) error { return b.b.ForEachBucket(fn) }
func (b *boltBucket) Sequence() uint64                               { return b.b.Sequence() }
func (b *boltBucket) Stats() bbolt.BucketStats                       { return b.b.Stats() }

// Cursor iterates the bucket; it must not be used to delete (its Delete
// would not be recorded): delete through the bucket.
func (b *boltBucket) Cursor() *bbolt.Cursor { return b.b.Cursor() }

// setFillPercent sets the bucket's page fill for this transaction.
func (b *boltBucket) setFillPercent(p float64) { b.b.FillPercent = p }

// Put stores value under key.
func (b *boltBucket) Put(key, value []byte) error {
	if err := b.b.Put(key, value); err != nil {
		return err
	}
	b.ws.add(Op{Kind: OpPut, Bucket: b.path, Key: key, Value: value})
	return nil
}

// Delete removes key; a missing key is not an error.
func (b *boltBucket) Delete(key []byte) error {
	if err := b.b.Delete(key); err != nil {
		return err
	}
	b.ws.add(Op{Kind: OpDelete, Bucket: b.path, Key: key})
	return nil
}

// NextSequence increments the bucket's sequence and returns it.
func (b *boltBucket) NextSequence() (uint64, error) {
	n, err := b.b.NextSequence()
	if err != nil {
		return 0, err
	}
	b.ws.add(Op{Kind: OpSetSequence, Bucket: b.path, Seq: n})
	return n, nil
}

// SetSequence sets the bucket's sequence.
func (b *boltBucket) SetSequence(n uint64) error {
	if err := b.b.SetSequence(n); err != nil {
		return err
	}
	b.ws.add(Op{Kind: OpSetSequence, Bucket: b.path, Seq: n})
	return nil
}

// Bucket returns the nested bucket name, nil when there is none.
func (b *boltBucket) Bucket(name []byte) *boltBucket {
	nb := b.b.Bucket(name)
	if nb == nil {
		return nil
	}
	return &boltBucket{b: nb, path: b.child(name), ws: b.ws}
}

// CreateBucketIfNotExists returns the nested bucket name, creating it.
func (b *boltBucket) CreateBucketIfNotExists(name []byte) (*boltBucket, error) {
	if nb := b.Bucket(name); nb != nil {
		return nb, nil
	}
	nb, err := b.b.CreateBucket(name)
	if err != nil {
		return nil, err
	}
	path := b.child(name)
	b.ws.add(Op{Kind: OpCreateBucket, Bucket: path})
	return &boltBucket{b: nb, path: path, ws: b.ws}, nil
}

// DeleteBucket removes the nested bucket name and all under it; a
// missing one is berrors.ErrBucketNotFound.
func (b *boltBucket) DeleteBucket(name []byte) error {
	if err := b.b.DeleteBucket(name); err != nil {
		return err
	}
	b.ws.add(Op{Kind: OpDeleteBucket, Bucket: b.child(name)})
	return nil
}

// child is the path of the nested bucket name, in a slice of its own.
func (b *boltBucket) child(name []byte) []string {
	path := make([]string, len(b.path), len(b.path)+1)
	copy(path, b.path)
	return append(path, string(name))
}

// errReplicate wraps a replicator's refusal; the transaction rolled back.
var errReplicate = errors.New("replicate")

// runRecorded runs fn in the read-write transaction tx and, with
// replicate set and anything written, hands the write set to replicate
// before bbolt commits: replicate's error rolls the transaction back.
// check runs last, standing in for the commit's own failures (the
// store's injected disk faults). replicated reports whether replicate
// took the write set.
func runRecorded(tx *bbolt.Tx, replicate Replicator, fn func(*boltTx) error, check func() error) (replicated bool, err error) {
	t := &boltTx{tx: tx}
	if replicate != nil {
		t.ws = &WriteSet{}
	}
	if err := fn(t); err != nil {
		return false, err
	}
	if t.ws != nil && len(t.ws.Ops) > 0 {
		if err := replicate(context.Background(), t.ws); err != nil {
			return false, fmt.Errorf("%w %d writes: %w", errReplicate, len(t.ws.Ops), err)
		}
		replicated = true
	}
	if check != nil {
		if err := check(); err != nil {
			return replicated, err
		}
	}
	return replicated, nil
}
