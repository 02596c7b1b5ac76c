package leader

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// follower calls a function with the leader key each time etcd may have
// changed it. It is level-triggered: a watch event, a watch error, cancel
// or close, and every resync interval all lead to a fresh Get, so a
// deletion the watch missed (compaction, a cancelled or stalled watch) is
// still seen, at the latest one resync later.
type follower struct {
	client *clientv3.Client
	prefix string        // candidates' key prefix, ending in "/"
	resync time.Duration // longest wait between two Gets
	retry  time.Duration // pause after a failed Get
}

// follow calls fn with the first-created key under the prefix, nil when
// there is none, until fn returns false or ctx ends.
func (f follower) follow(ctx context.Context, fn func(*mvccpb.KeyValue) bool) {
	for ctx.Err() == nil {
		gctx, cancel := context.WithTimeout(ctx, f.resync)
		resp, err := getFirst(gctx, f.client, f.prefix)
		cancel()
		if err != nil {
			sleep(ctx, f.retry)
			continue
		}
		if !fn(firstKV(resp)) {
			return
		}
		f.waitChange(ctx, resp.Header.Revision+1)
	}
}

// waitChange returns at the first watch response under the prefix from
// rev on, when the watch fails or ends, after the resync interval, or when
// ctx ends.
func (f follower) waitChange(ctx context.Context, rev int64) {
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	wch := f.client.Watch(wctx, f.prefix, clientv3.WithPrefix(), clientv3.WithRev(rev))
	resync := time.NewTimer(f.resync)
	defer resync.Stop()
	select {
	case <-wch:
	case <-resync.C:
	case <-ctx.Done():
	}
}

// getFirst reads the first-created key under prefix: the leader's.
func getFirst(ctx context.Context, kv clientv3.KV, prefix string) (*clientv3.GetResponse, error) {
	return kv.Get(ctx, prefix, clientv3.WithFirstCreate()...)
}

func firstKV(resp *clientv3.GetResponse) *mvccpb.KeyValue {
	if len(resp.Kvs) == 0 {
		return nil
	}
	return resp.Kvs[0]
}

// decodeLeader returns the Info in a leader key; ErrNoLeader for nil.
func decodeLeader(prefix string, kv *mvccpb.KeyValue) (Info, error) {
	if kv == nil {
		return Info{}, fmt.Errorf("leader of %s: %w", prefix, ErrNoLeader)
	}
	var info Info
	if err := json.Unmarshal(kv.Value, &info); err != nil {
		return Info{}, fmt.Errorf("leader key %s: decode info: %w", kv.Key, err)
	}
	return info, nil
}

// Observer follows who leads a prefix, for a standby that tells its
// clients where the leader is without asking etcd on every request.
type Observer struct {
	prefix string
	f      follower

	mu     sync.Mutex // guards leader and ok
	leader Info
	ok     bool
}

// NewObserver returns an Observer of prefix (DefaultPrefix when empty) that
// re-reads the leader at least every resync (DefaultTTL/3 when zero).
func NewObserver(client *clientv3.Client, prefix string, resync time.Duration) *Observer {
	if prefix == "" {
		prefix = DefaultPrefix
	}
	if resync <= 0 {
		resync = opTimeout(DefaultTTL)
	}
	return &Observer{
		prefix: prefix,
		f:      follower{client: client, prefix: prefix + "/", resync: resync, retry: resync / 3},
	}
}

// Run follows the leader until ctx ends, then returns nil.
func (o *Observer) Run(ctx context.Context) error {
	o.f.follow(ctx, func(kv *mvccpb.KeyValue) bool {
		info, err := decodeLeader(o.prefix, kv)
		o.set(info, err == nil)
		return true
	})
	return nil
}

// Leader returns the leader last read, and false when there was none (or
// its key could not be decoded, or none was read yet).
func (o *Observer) Leader() (Info, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.leader, o.ok
}

func (o *Observer) set(info Info, ok bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.leader, o.ok = info, ok
}
