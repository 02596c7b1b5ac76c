package leader

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/edgeset/edgeset/internal/checkfor"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// waitFor and pollEvery pace the tests' Eventually calls: generous, since a
// takeover after a partition takes about one 1 s TTL.
const (
	waitFor   = 10 * time.Second
	pollEvery = 10 * time.Millisecond
)

// candidate is an Elector running in the background that records every
// term its Lead was called with.
type candidate struct {
	t      testing.TB
	id     string
	e      *Elector
	cancel context.CancelFunc
	done   chan struct{} // closed when Run returned

	mu    sync.Mutex // guards terms
	terms []*Term
}

// holdTerm is a Lead that does nothing but hold the term.
func holdTerm(ctx context.Context, _ *Term) error {
	<-ctx.Done()
	return nil
}

// startCandidate runs an elector named id on cli with lead (holdTerm when
// nil); it is stopped when the test ends.
func startCandidate(t testing.TB, cli *clientv3.Client, id string, ttl time.Duration, lead func(context.Context, *Term) error) *candidate {
	t.Helper()
	if lead == nil {
		lead = holdTerm
	}
	c := &candidate{t: t, id: id, done: make(chan struct{})}
	e, err := New(Options{
		Client: cli, Prefix: "/test/leader", ID: id, APIURL: apiURL(id), TTL: ttl,
		Lead: func(ctx context.Context, term *Term) error {
			c.mu.Lock()
			c.terms = append(c.terms, term)
			c.mu.Unlock()
			return lead(ctx, term)
		},
	})
	if err != nil {
		t.Fatalf("new elector %s: %v", id, err)
	}
	c.e = e
	ctx, cancel := context.WithCancel(context.Background())
	c.cancel = cancel
	go func() {
		defer close(c.done)
		if err := e.Run(ctx); err != nil {
			t.Errorf("elector %s: Run: %v", id, err)
		}
	}()
	t.Cleanup(c.stop)
	return c
}

func apiURL(id string) string { return "https://" + id + ".example:8443" }

// stop ends Run and waits for it to return.
func (c *candidate) stop() {
	c.cancel()
	checkfor.Eventually(c.t, waitFor, pollEvery, func() error {
		select {
		case <-c.done:
			return nil
		default:
			return fmt.Errorf("elector %s: Run has not returned", c.id)
		}
	})
}

func (c *candidate) allTerms() []*Term {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]*Term(nil), c.terms...)
}

// waitLeading waits until c leads and returns its term.
func (c *candidate) waitLeading(t testing.TB) *Term {
	t.Helper()
	var term *Term
	checkfor.Eventually(t, waitFor, pollEvery, func() error {
		var ok bool
		if term, ok = c.e.Term(); !ok {
			return fmt.Errorf("%s does not lead", c.id)
		}
		return nil
	})
	return term
}

// waitCandidates waits until n candidates' keys are under the test prefix.
func waitCandidates(t testing.TB, cli *clientv3.Client, n int) *clientv3.GetResponse {
	t.Helper()
	var resp *clientv3.GetResponse
	checkfor.Eventually(t, waitFor, pollEvery, func() error {
		var err error
		resp, err = cli.Get(t.Context(), "/test/leader/", clientv3.WithPrefix())
		if err != nil {
			return err
		}
		if len(resp.Kvs) != n {
			return fmt.Errorf("%d candidate keys, want %d", len(resp.Kvs), n)
		}
		return nil
	})
	return resp
}

// waitEnded waits until term's context has ended and returns its cause.
func waitEnded(t testing.TB, term *Term) error {
	t.Helper()
	checkfor.Eventually(t, waitFor, pollEvery, func() error {
		if term.Context().Err() == nil {
			return fmt.Errorf("term %d still active", term.Rev)
		}
		return nil
	})
	return context.Cause(term.Context())
}

func isAny(err error, targets ...error) bool {
	for _, target := range targets {
		if errors.Is(err, target) {
			return true
		}
	}
	return false
}

// faultyWatcher wraps a client's Watcher so a test can make watches miss
// events: while muted they deliver nothing, and Break ends every open watch
// with a compaction error (as a watch whose revision was compacted away
// ends) and unmutes.
type faultyWatcher struct {
	clientv3.Watcher

	mu       sync.Mutex // guards the fields below
	muted    bool
	broken   chan struct{} // closed by Break, then replaced
	watching int           // watches open
}

func installFaultyWatcher(cli *clientv3.Client) *faultyWatcher {
	fw := &faultyWatcher{Watcher: cli.Watcher, broken: make(chan struct{})}
	cli.Watcher = fw
	return fw
}

func (fw *faultyWatcher) Mute() {
	fw.mu.Lock()
	defer fw.mu.Unlock()
	fw.muted = true
}

func (fw *faultyWatcher) Break() {
	fw.mu.Lock()
	defer fw.mu.Unlock()
	fw.muted = false
	close(fw.broken)
	fw.broken = make(chan struct{})
}

func (fw *faultyWatcher) state() (muted bool, broken <-chan struct{}) {
	fw.mu.Lock()
	defer fw.mu.Unlock()
	return fw.muted, fw.broken
}

// waitWatching waits until at least one watch is open.
func (fw *faultyWatcher) waitWatching(t testing.TB) {
	t.Helper()
	checkfor.Eventually(t, waitFor, pollEvery, func() error {
		fw.mu.Lock()
		defer fw.mu.Unlock()
		if fw.watching == 0 {
			return errors.New("no watch open")
		}
		return nil
	})
}

func (fw *faultyWatcher) addWatching(n int) {
	fw.mu.Lock()
	defer fw.mu.Unlock()
	fw.watching += n
}

func (fw *faultyWatcher) Watch(ctx context.Context, key string, opts ...clientv3.OpOption) clientv3.WatchChan {
	inner := fw.Watcher.Watch(ctx, key, opts...)
	out := make(chan clientv3.WatchResponse)
	_, broken := fw.state()
	fw.addWatching(1)
	go func() {
		defer fw.addWatching(-1)
		defer close(out)
		for {
			select {
			case wr, ok := <-inner:
				if !ok {
					return
				}
				if muted, _ := fw.state(); muted {
					continue
				}
				select {
				case out <- wr:
				case <-ctx.Done():
					return
				}
			case <-broken:
				select {
				case out <- clientv3.WatchResponse{CompactRevision: 1, Canceled: true}:
				case <-ctx.Done():
				}
				return
			case <-ctx.Done():
				return
			}
		}
	}()
	return out
}
