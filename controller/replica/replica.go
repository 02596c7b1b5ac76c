package replica

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/edgeset/edgeset/controller/leader"
	"github.com/edgeset/edgeset/controller/store"
)

// Defaults applied by New to zero Options fields.
const (
	DefaultPrefix = "/edgeset/store"
	// DefaultMaxTxnOps stays below etcd's default --max-txn-ops (128),
	// with room for the fence's compare and nesting.
	DefaultMaxTxnOps = 120
	// DefaultMaxRequestBytes stays below etcd's default
	// --max-request-bytes (1.5 MiB).
	DefaultMaxRequestBytes = 1 << 20
	// DefaultRequestTimeout bounds one etcd request.
	DefaultRequestTimeout = 30 * time.Second
	// DefaultPageKeys is how many keys one read of Restore returns.
	DefaultPageKeys = 1000
)

// Errors of the replica; test them with errors.Is.
var (
	// ErrDiverged: a commit's outcome is unknown (the request failed in
	// flight), so etcd may hold a write the local store rolled back. The
	// replica refuses to commit until Restore has rebuilt the store from
	// etcd.
	ErrDiverged = errors.New("store cache may differ from etcd: rebuild it with Restore")
	// ErrNotEmpty: Seed found data under the prefix.
	ErrNotEmpty = errors.New("etcd prefix already holds a store")
)

// Fence sends a transaction only while this controller leads: an outer
// transaction conditioned on the leadership, with this one nested, failing
// with leader.ErrNotLeader once the leadership is gone. *leader.Term
// satisfies it. Every write of the replica goes through it.
type Fence interface {
	Txn(ctx context.Context, cmps []clientv3.Cmp, thenOps, elseOps []clientv3.Op) (*clientv3.TxnResponse, error)
}

var _ Fence = (*leader.Term)(nil)

// Options tune a Replica. The zero value is valid.
type Options struct {
	// MaxTxnOps bounds the writes of one transaction: at most etcd's
	// --max-txn-ops less the fence's (DefaultMaxTxnOps when zero).
	MaxTxnOps int
	// MaxRequestBytes bounds one request: below etcd's
	// --max-request-bytes (DefaultMaxRequestBytes when zero). A single
	// value larger than that cannot be stored and fails its commit.
	MaxRequestBytes int
	// RequestTimeout bounds each etcd request (DefaultRequestTimeout).
	RequestTimeout time.Duration
	// PageKeys is the page size of Restore's reads (DefaultPageKeys).
	PageKeys int
	// Log, when set, hears of long restores' progress and of staged
	// transactions finished or discarded.
	Log *slog.Logger
}

func (o Options) withDefaults() Options {
	if o.MaxTxnOps <= 0 {
		o.MaxTxnOps = DefaultMaxTxnOps
	}
	if o.MaxRequestBytes <= 0 {
		o.MaxRequestBytes = DefaultMaxRequestBytes
	}
	if o.RequestTimeout <= 0 {
		o.RequestTimeout = DefaultRequestTimeout
	}
	if o.PageKeys <= 0 {
		o.PageKeys = DefaultPageKeys
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	return o
}

// Replica keeps the controller's store in etcd under one prefix, for one
// term of leadership: Commit is the store's Options.Replicate, Restore
// rebuilds the store's file from etcd. Its methods are safe for
// concurrent use and run one at a time.
type Replica struct {
	kv     clientv3.KV // reads only: writes go through fence
	layout layout
	fence  Fence
	opts   Options

	mu sync.Mutex // guards the fields below and serializes the methods
	// recovered: the staged transactions left in etcd (by an earlier
	// term, or by a failed commit of this one) have been finished or
	// discarded, so a commit may follow.
	recovered bool
	// diverged, when set, is why a commit's outcome is unknown.
	diverged error
}

// New returns a replica of the store under prefix (DefaultPrefix when
// empty) that reads through cli and writes through f.
func New(cli *clientv3.Client, prefix string, f Fence, opts Options) *Replica {
	return &Replica{kv: cli, layout: newLayout(prefix), fence: f, opts: opts.withDefaults()}
}

func newLayout(prefix string) layout {
	if prefix == "" {
		prefix = DefaultPrefix
	}
	for len(prefix) > 1 && prefix[len(prefix)-1] == '/' {
		prefix = prefix[:len(prefix)-1]
	}
	return layout{prefix: prefix}
}

// Commit writes ws to etcd, fenced, as one atomic change: it is
// store.Options.Replicate. nil means etcd holds it durably. Within etcd's
// limits it is one transaction; a larger write set is staged in chunks,
// committed by one marker, then applied in batches (see the package
// documentation), and a term that ends mid-way leaves all or nothing of
// it visible once the next Restore ran. The first commit of a replica
// first finishes what an earlier term left staged. An error of unknown
// outcome is ErrDiverged (as well as its cause), and so is every later
// Commit's, until Restore.
func (r *Replica) Commit(ctx context.Context, ws *store.WriteSet) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.diverged != nil {
		return fmt.Errorf("commit to etcd: %w (after: %w)", ErrDiverged, r.diverged)
	}
	if err := r.recoverLocked(ctx); err != nil {
		return err
	}
	effects, err := reduce(r.layout, ws)
	if err != nil {
		return fmt.Errorf("commit to etcd: %w", err)
	}
	return r.commitLocked(ctx, effects, nil)
}

// commitLocked writes effects, conditioned on cmps as well as the fence
// (Seed's emptiness check; nil for Commit).
func (r *Replica) commitLocked(ctx context.Context, effects []effect, cmps []clientv3.Cmp) error {
	bs, err := batches(effects, r.limits())
	if err != nil {
		return fmt.Errorf("commit to etcd: %w", err)
	}
	switch len(bs) {
	case 0:
		return nil
	case 1:
		return r.direct(ctx, bs[0], cmps)
	}
	return r.staged(ctx, effects, bs, cmps)
}

func (r *Replica) limits() limits {
	return limits{ops: r.opts.MaxTxnOps, bytes: r.opts.MaxRequestBytes}
}

// direct commits one batch as one fenced transaction.
func (r *Replica) direct(ctx context.Context, batch []effect, cmps []clientv3.Cmp) error {
	if err := r.diverge(r.txn(ctx, cmps, ops(batch))); err != nil {
		return fmt.Errorf("commit %d writes to etcd: %w", len(batch), err)
	}
	return nil
}

// diverge marks the replica diverged when err leaves the outcome of a
// commit unknown, and returns err, then also ErrDiverged.
func (r *Replica) diverge(err error) error {
	if err == nil || known(err) {
		return err
	}
	r.diverged = err
	return fmt.Errorf("%w: %w", ErrDiverged, err)
}

// staged commits a write set too large for one transaction: its chunks
// under a fresh staging directory, then the commit marker (the write
// set's commit point), then the effects in batches, then the staging
// keys' removal. Once the marker landed the write set is committed: a
// later failure leaves the rest to the next recovery, which this
// replica's next Commit runs first.
func (r *Replica) staged(ctx context.Context, effects []effect, bs [][]effect, cmps []clientv3.Cmp) error {
	id, err := newTxnID()
	if err != nil {
		return err
	}
	chunks := encodeChunks(effects, r.opts.MaxRequestBytes-len(r.layout.chunkKey(id, 0))-opOverhead)
	for i, c := range chunks {
		put := clientv3.OpPut(r.layout.chunkKey(id, i), string(c))
		if err := r.txn(ctx, nil, []clientv3.Op{put}); err != nil {
			r.recovered = false // a later commit removes what was staged
			return fmt.Errorf("stage chunk %d of %d of txn %s (%d writes): %w", i+1, len(chunks), id, len(effects), err)
		}
	}
	marker := clientv3.OpPut(r.layout.markerKey(id), strconv.Itoa(len(chunks)))
	if err := r.diverge(r.txn(ctx, cmps, []clientv3.Op{marker})); err != nil {
		r.recovered = false
		return fmt.Errorf("commit staged txn %s (%d writes): %w", id, len(effects), err)
	}
	if err := r.apply(ctx, id, bs); err != nil {
		r.recovered = false
		r.opts.Log.Warn("staged txn committed, its apply left to the next recovery", "txn", id, "err", err)
	}
	return nil
}

// apply writes the batches of the committed staged transaction id, then
// removes its staging keys.
func (r *Replica) apply(ctx context.Context, id string, bs [][]effect) error {
	for i, b := range bs {
		if err := r.txn(ctx, nil, ops(b)); err != nil {
			return fmt.Errorf("apply batch %d of %d of staged txn %s: %w", i+1, len(bs), id, err)
		}
	}
	return r.discard(ctx, id)
}

// discard removes the staging keys of id.
func (r *Replica) discard(ctx context.Context, id string) error {
	dir := r.layout.stagingDir(id)
	if err := r.txn(ctx, nil, []clientv3.Op{clientv3.OpDelete(dir, clientv3.WithRange(prefixEnd(dir)))}); err != nil {
		return fmt.Errorf("remove staged txn %s: %w", id, err)
	}
	return nil
}

// txn sends ops through the fence within the request timeout; cmps that
// do not hold fail it.
func (r *Replica) txn(ctx context.Context, cmps []clientv3.Cmp, ops []clientv3.Op) error {
	ctx, cancel := context.WithTimeout(ctx, r.opts.RequestTimeout)
	defer cancel()
	resp, err := r.fence.Txn(ctx, cmps, ops, nil)
	if err != nil {
		if errors.Is(err, leader.ErrNotLeader) || refused(err) {
			return err
		}
		return &inFlightError{err: err, termOver: r.termOver()}
	}
	if !resp.Succeeded {
		return errCompare
	}
	return nil
}

// errCompare: a transaction's own condition (Seed's: the prefix is empty)
// did not hold; nothing was written.
var errCompare = errors.New("etcd transaction's condition failed")

// inFlightError is a request that failed with its outcome unknown (a
// timeout, a connection lost, a call the term abandoned when it ended):
// etcd may have applied it. When the fence's term is over it is also
// leader.ErrNotLeader, which is what the caller must act on.
type inFlightError struct {
	err      error
	termOver bool
}

func (e *inFlightError) Error() string { return e.err.Error() }

func (e *inFlightError) Unwrap() []error {
	if e.termOver {
		return []error{e.err, leader.ErrNotLeader}
	}
	return []error{e.err}
}

// known reports whether err says for sure what was written: nothing,
// because the fence refused, the transaction's condition failed or a
// write was too large. A request that failed in flight leaves the
// outcome unknown.
func known(err error) bool {
	var inFlight *inFlightError
	return !errors.As(err, &inFlight)
}

// refused reports whether etcd (or the client, before sending) refused
// the request as such: too large, too many operations, over the space
// quota. Nothing was applied.
func refused(err error) bool {
	code := status.Code(err)
	var ee rpctypes.EtcdError
	if errors.As(err, &ee) {
		code = ee.Code()
	}
	switch code {
	case codes.InvalidArgument, codes.ResourceExhausted, codes.FailedPrecondition:
		return true
	}
	return false
}

// termOver reports whether the fence is a term (it has a Context, as
// *leader.Term) that has ended.
func (r *Replica) termOver() bool {
	t, ok := r.fence.(interface{ Context() context.Context })
	return ok && t.Context().Err() != nil
}

func ops(effects []effect) []clientv3.Op {
	out := make([]clientv3.Op, len(effects))
	for i, e := range effects {
		out[i] = e.op()
	}
	return out
}

func newTxnID() (string, error) {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("staged txn id: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}
