package replica

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// stagedTxn is one staged transaction found in etcd.
type stagedTxn struct {
	id        string
	chunks    []string // chunk keys, in order
	committed bool     // its marker is present
	markerRev int64    // the marker's create revision
	nChunks   int      // what the marker says
}

// recoverLocked finishes the staged transactions whose marker is present,
// in the order of their markers (applying a committed one again is
// harmless: its effects are idempotent), and removes those without one,
// which never committed. It runs once per replica, and again after a
// commit that left staging keys behind.
func (r *Replica) recoverLocked(ctx context.Context) error {
	if r.recovered {
		return nil
	}
	txns, err := r.listStaged(ctx)
	if err != nil {
		return err
	}
	for _, t := range txns {
		if !t.committed {
			if err := r.discard(ctx, t.id); err != nil {
				return fmt.Errorf("recover: %w", err)
			}
			r.opts.Log.Info("discarded uncommitted staged store txn", "txn", t.id, "chunks", len(t.chunks))
			continue
		}
		if err := r.finish(ctx, t); err != nil {
			return fmt.Errorf("recover: %w", err)
		}
		r.opts.Log.Info("finished committed staged store txn", "txn", t.id, "chunks", t.nChunks)
	}
	r.recovered = true
	return nil
}

// listStaged reads the staging keys (keys only: chunks are large) and
// groups them by transaction, the committed ones in marker order.
func (r *Replica) listStaged(ctx context.Context) ([]*stagedTxn, error) {
	byID := map[string]*stagedTxn{}
	var order []*stagedTxn
	_, err := r.scan(ctx, r.layout.staging(), []clientv3.OpOption{clientv3.WithKeysOnly()}, func(kvs []*kvPair) error {
		for _, kv := range kvs {
			id, name, ok := strings.Cut(strings.TrimPrefix(kv.key, r.layout.staging()), "/")
			if !ok {
				return fmt.Errorf("recover: staging key %q: no transaction id", kv.key)
			}
			t := byID[id]
			if t == nil {
				t = &stagedTxn{id: id}
				byID[id] = t
				order = append(order, t)
			}
			if name == "commit" {
				t.committed, t.markerRev = true, kv.createRev
			} else {
				t.chunks = append(t.chunks, kv.key)
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("recover: list staged txns: %w", err)
	}
	slices.SortStableFunc(order, func(a, b *stagedTxn) int { return cmp.Compare(a.markerRev, b.markerRev) })
	return order, nil
}

// finish applies the committed staged transaction t again and removes it.
func (r *Replica) finish(ctx context.Context, t *stagedTxn) error {
	n, err := r.markerChunks(ctx, t.id)
	if err != nil {
		return err
	}
	if n != len(t.chunks) {
		return fmt.Errorf("staged txn %s: marker says %d chunks, %d found", t.id, n, len(t.chunks))
	}
	t.nChunks = n
	var effects []effect
	for i := range n {
		key := r.layout.chunkKey(t.id, i)
		resp, err := r.get(ctx, key)
		if err != nil {
			return fmt.Errorf("staged txn %s: read chunk %d: %w", t.id, i, err)
		}
		if len(resp.Kvs) != 1 {
			return fmt.Errorf("staged txn %s: chunk %s missing", t.id, key)
		}
		if effects, err = decodeChunk(effects, resp.Kvs[0].Value); err != nil {
			return fmt.Errorf("staged txn %s: chunk %s: %w", t.id, key, err)
		}
	}
	bs, err := batches(effects, r.limits())
	if err != nil {
		return fmt.Errorf("staged txn %s: %w", t.id, err)
	}
	return r.apply(ctx, t.id, bs)
}

func (r *Replica) markerChunks(ctx context.Context, id string) (int, error) {
	resp, err := r.get(ctx, r.layout.markerKey(id))
	if err != nil {
		return 0, fmt.Errorf("staged txn %s: read marker: %w", id, err)
	}
	if len(resp.Kvs) != 1 {
		return 0, fmt.Errorf("staged txn %s: marker gone", id)
	}
	n, err := strconv.Atoi(string(resp.Kvs[0].Value))
	if err != nil || n < 0 {
		return 0, fmt.Errorf("staged txn %s: marker %q is not a chunk count", id, resp.Kvs[0].Value)
	}
	return n, nil
}

func (r *Replica) get(ctx context.Context, key string, opts ...clientv3.OpOption) (*clientv3.GetResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, r.opts.RequestTimeout)
	defer cancel()
	return r.kv.Get(ctx, key, opts...)
}

// kvPair is what scan hands on of one key.
type kvPair struct {
	key       string
	value     []byte
	createRev int64
}

// scan reads every key under prefix in pages of PageKeys, all at the
// revision of the first page (one consistent view), and hands each page
// to fn. It returns that revision.
func (r *Replica) scan(ctx context.Context, prefix string, extra []clientv3.OpOption, fn func([]*kvPair) error) (int64, error) {
	end := prefixEnd(prefix)
	from := prefix
	var rev int64
	for {
		opts := append([]clientv3.OpOption{clientv3.WithRange(end), clientv3.WithLimit(int64(r.opts.PageKeys))}, extra...)
		if rev != 0 {
			opts = append(opts, clientv3.WithRev(rev))
		}
		resp, err := r.get(ctx, from, opts...)
		if err != nil {
			return rev, fmt.Errorf("read %s from %q: %w", prefix, from, err)
		}
		if rev == 0 {
			rev = resp.Header.Revision
		}
		page := make([]*kvPair, len(resp.Kvs))
		for i, kv := range resp.Kvs {
			page[i] = &kvPair{key: string(kv.Key), value: kv.Value, createRev: kv.CreateRevision}
		}
		if err := fn(page); err != nil {
			return rev, err
		}
		if !resp.More || len(resp.Kvs) == 0 {
			return rev, nil
		}
		from = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
	}
}
