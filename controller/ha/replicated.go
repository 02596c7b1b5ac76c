package ha

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"sync"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/edgeset/edgeset/controller/replica"
	"github.com/edgeset/edgeset/controller/store"
)

// storeKey is the store's prefix under Options.Prefix (controller/replica).
const storeKey = "/store"

// Replicated is the Prepare of a controller whose store lives in etcd
// under prefix+"/store" (controller/replica). For each term it rebuilds
// the data directory's store file from etcd (Restore: the file is only a
// cache) and makes every store write commit to etcd first, fenced by the
// term, so a deposed leader's late write never lands. A commit whose
// outcome is unknown (replica.ErrDiverged) aborts the term: the next one
// restores the cache again. The fleet's founder (see TermSetup.Founder)
// first seeds an empty etcd from the store file it brings, so a
// single-node controller's state becomes the fleet's.
func Replicated(cli *clientv3.Client, prefix string, log *slog.Logger) func(context.Context, *TermSetup) error {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return func(ctx context.Context, s *TermSetup) error {
		path := s.Config.StorePath()
		if s.Founder {
			if err := seed(ctx, cli, prefix+storeKey, s, path, log); err != nil {
				return err
			}
		}
		r := replica.New(cli, prefix+storeKey, s.Term, replica.Options{Log: log})
		if err := r.Restore(ctx, path); err != nil {
			return err
		}
		g := &behindGuard{abort: s.Abort}
		s.Config.Replicate = func(ctx context.Context, ws *store.WriteSet) error {
			return g.committed(r.Commit(ctx, ws))
		}
		s.Config.OnStoreFault = g.fault
		return nil
	}
}

// behindGuard ends a term whose store cache can no longer follow etcd:
// a commit whose outcome is unknown (replica.ErrDiverged), or a local
// write that failed after etcd took it (the store then refuses every
// write with store.ErrBehind until the file is rebuilt, which the next
// term's Restore does). The store calls Replicate and then reports the
// local outcome one transaction at a time, so the last commit's outcome
// is the one a fault follows.
type behindGuard struct {
	abort func(error)

	mu         sync.Mutex // guards replicated
	replicated bool       // the last write set is in etcd
}

// committed records the outcome of Replicate and passes it on.
func (g *behindGuard) committed(err error) error {
	g.mu.Lock()
	g.replicated = err == nil
	g.mu.Unlock()
	if errors.Is(err, replica.ErrDiverged) {
		g.abort(err)
	}
	return err
}

// fault is the controller's OnStoreFault.
func (g *behindGuard) fault(err error) {
	g.mu.Lock()
	behind := g.replicated
	g.replicated = false
	g.mu.Unlock()
	if behind {
		g.abort(fmt.Errorf("the store file failed a write etcd holds, so it is behind etcd: %w", err))
	}
}

// seed copies the store file at path, when there is one, into an empty
// etcd; a store already in etcd wins (replica.ErrNotEmpty).
func seed(ctx context.Context, cli *clientv3.Client, prefix string, s *TermSetup, path string, log *slog.Logger) error {
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	err := replica.Seed(ctx, cli, prefix, s.Term, path)
	switch {
	case err == nil:
		log.Info("seeded etcd with the data directory's store", "store", path, "prefix", prefix)
		return nil
	case errors.Is(err, replica.ErrNotEmpty):
		return nil
	default:
		return fmt.Errorf("seed etcd from %s: %w", path, err)
	}
}
