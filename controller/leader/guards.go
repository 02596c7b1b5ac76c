package leader

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
)

// The guards each end a term (end with a cause) on one kind of loss, and
// return when the term's ctx ends.

// guardSession ends the term when the session's keep-alive ends.
func guardSession(ctx context.Context, end context.CancelCauseFunc, s *session) {
	select {
	case <-s.Done():
		end(ErrSessionLost)
	case <-ctx.Done():
	}
}

// driftMargin is how long before the lease can expire on the server the
// term ends: a tenth of the TTL, for clock-rate drift and scheduling.
func driftMargin(ttl time.Duration) time.Duration { return ttl / 10 }

// guardLease renews the lease every third of its TTL and ends the term
// when no renewal was confirmed before the lease could expire. The deadline
// runs from when a renewal was sent: etcd renewed it no earlier.
func (e *Elector) guardLease(ctx context.Context, end context.CancelCauseFunc, s *session) {
	deadline := s.granted.Add(s.ttl - driftMargin(s.ttl))
	expiry := time.NewTimer(time.Until(deadline))
	defer expiry.Stop()
	tick := time.NewTicker(opTimeout(s.ttl))
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-expiry.C:
			end(fmt.Errorf("lease %x: %w", s.Lease(), ErrLeaseDeadline))
			return
		case <-tick.C:
			next, err := e.renew(ctx, s, deadline)
			if errors.Is(err, rpctypes.ErrLeaseNotFound) {
				end(fmt.Errorf("lease %x: %w", s.Lease(), ErrSessionLost))
				return
			}
			if err == nil {
				deadline = next
				expiry.Reset(time.Until(deadline))
			}
		}
	}
}

// renew sends one keep-alive, waiting no longer than the current deadline,
// and returns the deadline it confirms.
func (e *Elector) renew(ctx context.Context, s *session, deadline time.Time) (time.Time, error) {
	rctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	sent := time.Now()
	resp, err := e.opts.Client.KeepAliveOnce(rctx, s.Lease())
	if err != nil {
		return time.Time{}, err
	}
	ttl := time.Duration(resp.TTL) * time.Second
	return sent.Add(ttl - driftMargin(ttl)), nil
}

// guardKey ends the term when the first-created key under the prefix is no
// longer the term's key at its revision.
func (e *Elector) guardKey(ctx context.Context, end context.CancelCauseFunc, t *Term, ttl time.Duration) {
	f := follower{client: e.opts.Client, prefix: e.keyPrefix, resync: opTimeout(ttl), retry: e.opts.RetryInterval}
	f.follow(ctx, func(kv *mvccpb.KeyValue) bool {
		if kv == nil || string(kv.Key) != t.Key || kv.CreateRevision != t.Rev {
			end(fmt.Errorf("key %s at revision %d: %w", t.Key, t.Rev, ErrKeyLost))
			return false
		}
		return true
	})
}
