package leader

import (
	"context"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Term is one won election: the leader key and its create revision. It is
// immutable; its context ends when the term does.
type Term struct {
	Key    string           // the leader key, prefix/<lease-hex>
	Rev    int64            // the leader key's create revision
	Lease  clientv3.LeaseID // the session lease the key is on
	Leader Info             // this elector's Info

	kv  clientv3.KV
	ctx context.Context
}

// Context ends when the term ends; context.Cause says why (ErrSessionLost,
// ErrLeaseDeadline, ErrKeyLost or ErrResigned).
func (t *Term) Context() context.Context { return t.ctx }

// Txn commits, if this term still leads, the transaction If(cmps).Then(
// thenOps).Else(elseOps) and returns its response (Succeeded: whether cmps
// held). The transaction is nested in an outer one conditioned on the
// leader key's create revision, so once the key is gone it changes nothing
// and Txn returns ErrNotLeader; it returns ErrNotLeader without asking etcd
// once the term's context has ended.
//
// A call in flight when the term ends is abandoned (etcd waits for a
// partitioned client's calls for as long as ctx allows): its outcome is
// unknown, as after a timeout, but if it landed it landed before any later
// term began.
func (t *Term) Txn(ctx context.Context, cmps []clientv3.Cmp, thenOps, elseOps []clientv3.Op) (*clientv3.TxnResponse, error) {
	if t.ctx.Err() != nil {
		return nil, fmt.Errorf("term %d ended (%v): %w", t.Rev, context.Cause(t.ctx), ErrNotLeader)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(t.ctx, cancel)
	defer stop()
	resp, err := t.fencedTxn(ctx, cmps, thenOps, elseOps)
	if err != nil && t.ctx.Err() != nil && ctx.Err() != nil {
		return nil, fmt.Errorf("term %d ended (%v) with the txn in flight: %w", t.Rev, context.Cause(t.ctx), err)
	}
	return resp, err
}

// Fenced commits ops if this term still leads; ErrNotLeader otherwise.
func (t *Term) Fenced(ctx context.Context, ops ...clientv3.Op) error {
	_, err := t.Txn(ctx, nil, ops, nil)
	return err
}

// fencedTxn sends the fenced transaction whatever the term's context says:
// etcd alone decides.
func (t *Term) fencedTxn(ctx context.Context, cmps []clientv3.Cmp, thenOps, elseOps []clientv3.Op) (*clientv3.TxnResponse, error) {
	fence := clientv3.Compare(clientv3.CreateRevision(t.Key), "=", t.Rev)
	resp, err := t.kv.Txn(ctx).If(fence).Then(clientv3.OpTxn(cmps, thenOps, elseOps)).Commit()
	if err != nil {
		return nil, fmt.Errorf("fenced txn of term %d: %w", t.Rev, err)
	}
	if !resp.Succeeded {
		return nil, fmt.Errorf("fenced txn of term %d: key %s gone: %w", t.Rev, t.Key, ErrNotLeader)
	}
	inner := (*clientv3.TxnResponse)(resp.Responses[0].GetResponseTxn())
	inner.Header = resp.Header
	return inner, nil
}
