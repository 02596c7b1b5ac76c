package leader

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/edgeset/edgeset/internal/checkfor"
	"github.com/edgeset/edgeset/internal/etcdtest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

const writesKey = "/test/writes"

// writeLog counts the fenced writes of every term.
type writeLog struct {
	mu                       sync.Mutex // guards the fields below
	landed, refused, unknown int        // unknown: failed otherwise (timeout), may have landed
	late, lateLanded         int
}

func (w *writeLog) record(late bool, err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case late:
		w.late++
		if err == nil {
			w.lateLanded++
		} else if !errors.Is(err, ErrNotLeader) {
			w.unknown++
		}
	case err == nil:
		w.landed++
	case errors.Is(err, ErrNotLeader):
		w.refused++
	default:
		w.unknown++
	}
}

// writer is a Lead that writes its term's revision to writesKey until the
// term ends, then, as a deposed leader that has not noticed yet would, sends
// two more writes past the local check: etcd alone must refuse them once a
// later term began.
func (w *writeLog) writer(ctx context.Context, t *Term) error {
	put := []clientv3.Op{clientv3.OpPut(writesKey, strconv.FormatInt(t.Rev, 10))}
	for ctx.Err() == nil {
		wctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		_, err := t.Txn(wctx, nil, put, nil)
		cancel()
		w.record(false, err)
		sleep(ctx, 5*time.Millisecond)
	}
	for range 2 {
		wctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		_, err := t.fencedTxn(wctx, nil, put, nil)
		cancel()
		w.record(true, err)
	}
	return nil
}

// seed is LEADER_SEED when set, to replay a failure, else random.
func seed(t *testing.T) uint64 {
	if s := os.Getenv("LEADER_SEED"); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		require.NoError(t, err, "LEADER_SEED")
		return n
	}
	return rand.Uint64()
}

// Property: over a random sequence of shutdowns, restarts, revoked
// sessions and partitions of three electors, every fenced write that landed
// was made by the term that led at that revision: no write of an older
// term lands once a later term began.
func TestFencedWritesOfDifferentTermsNeverInterleave(t *testing.T) {
	s := seed(t)
	t.Logf("seed %d (LEADER_SEED=%d replays it)", s, s)
	rng := rand.New(rand.NewPCG(s, s))
	srv := etcdtest.Start(t)
	check := srv.Client(t)
	writes := &writeLog{}

	const n = 3
	proxies := make([]*etcdtest.Proxy, n)
	clients := make([]*clientv3.Client, n)
	running := make([]*candidate, n)
	var started []*candidate
	start := func(i int) {
		running[i] = startCandidate(t, clients[i], fmt.Sprint("c", i), testTTL, writes.writer)
		started = append(started, running[i])
	}
	cut := make([]bool, n)
	for i := range n {
		proxies[i] = etcdtest.NewProxy(t, srv.Endpoint())
		clients[i] = etcdtest.NewClient(t, proxies[i].Endpoint())
		start(i)
	}
	for step := range 12 {
		i := rng.IntN(n)
		switch action := rng.IntN(3); {
		case action == 0 && running[i] != nil:
			t.Logf("step %d: stop c%d", step, i)
			running[i].stop()
			running[i] = nil
		case action == 0:
			t.Logf("step %d: start c%d", step, i)
			start(i)
		case action == 1 && running[i] != nil:
			if term, ok := running[i].e.Term(); ok {
				t.Logf("step %d: revoke c%d's lease", step, i)
				_, _ = check.Revoke(t.Context(), term.Lease)
			}
		case cut[i]:
			t.Logf("step %d: heal c%d", step, i)
			proxies[i].Restore()
			cut[i] = false
		default:
			t.Logf("step %d: partition c%d", step, i)
			proxies[i].Cut()
			cut[i] = true
		}
		// Pacing, not synchronisation: let terms start, write and end
		// between steps, at varying points.
		time.Sleep(time.Duration(rng.IntN(400)) * time.Millisecond)
	}
	// A schedule may leave one term writing alone, which checks nothing:
	// heal everything, run every candidate, and hand over once, so at
	// least two terms wrote before the check.
	for i := range n {
		proxies[i].Restore()
		cut[i] = false
		if running[i] == nil {
			start(i)
		}
	}
	leading := func() int {
		for i, c := range running {
			if c != nil {
				if _, ok := c.e.Term(); ok {
					return i
				}
			}
		}
		return -1
	}
	landedNow := func() int {
		writes.mu.Lock()
		defer writes.mu.Unlock()
		return writes.landed
	}
	checkfor.Eventually(t, waitFor, pollEvery, func() error {
		if leading() < 0 {
			return errors.New("no candidate leads")
		}
		return nil
	})
	i := leading()
	t.Logf("handover: stop c%d", i)
	running[i].stop()
	running[i] = nil
	before := landedNow()
	checkfor.Eventually(t, waitFor, pollEvery, func() error {
		if leading() < 0 || landedNow() <= before {
			return errors.New("no new term has written yet")
		}
		return nil
	})
	for i := range n {
		if running[i] != nil {
			running[i].stop()
		}
	}
	// Every term has ended: a late write from any of them, sent past the
	// local check through a healed network, must be refused by etcd.
	terms := 0
	for _, c := range started {
		for _, term := range c.allTerms() {
			terms++
			put := clientv3.OpPut(writesKey, strconv.FormatInt(term.Rev, 10))
			checkfor.Eventually(t, waitFor, pollEvery, func() error {
				_, err := term.fencedTxn(t.Context(), nil, []clientv3.Op{put}, nil)
				if !errors.Is(err, ErrNotLeader) {
					return fmt.Errorf("late write of ended term %d: %v", term.Rev, err)
				}
				return nil
			})
		}
	}

	landed := checkLandedWritesAgainstLeaders(t, check)
	writes.mu.Lock()
	defer writes.mu.Unlock()
	t.Logf("%d terms; writes: %d landed, %d refused as not leader, %d outcome unknown; late writes: %d sent, %d landed (while still leading)",
		terms, writes.landed, writes.refused, writes.unknown, writes.late, writes.lateLanded)
	assert.GreaterOrEqual(t, landed, writes.landed+writes.lateLanded, "every write reported landed is in etcd")
	assert.LessOrEqual(t, landed, writes.landed+writes.lateLanded+writes.unknown, "etcd holds no write that was refused")
	assert.Positive(t, writes.late, "deposed terms sent late writes")
}

// checkLandedWritesAgainstLeaders replays etcd's history under /test/ and
// checks that each write to writesKey carries the create revision of the
// leader key at that revision (the first-created candidate key alive). It
// returns the number of writes and fails unless at least two terms wrote.
func checkLandedWritesAgainstLeaders(t *testing.T, cli *clientv3.Client) int {
	t.Helper()
	events := history(t, cli, "/test/")
	alive := map[string]int64{} // candidate key -> create revision
	writers := map[int64]bool{}
	writes := 0
	for _, ev := range events {
		key := string(ev.Kv.Key)
		switch {
		case strings.HasPrefix(key, "/test/leader/") && ev.Type == mvccpb.DELETE:
			delete(alive, key)
		case strings.HasPrefix(key, "/test/leader/"):
			alive[key] = ev.Kv.CreateRevision
		case key == writesKey:
			rev, err := strconv.ParseInt(string(ev.Kv.Value), 10, 64)
			require.NoError(t, err)
			require.Equal(t, leaderRev(alive), rev, "write at revision %d", ev.Kv.ModRevision)
			writers[rev] = true
			writes++
		}
	}
	require.GreaterOrEqual(t, len(writers), 2, "terms that wrote")
	return writes
}

// leaderRev is the smallest create revision among alive; 0 when empty.
func leaderRev(alive map[string]int64) int64 {
	var first int64
	for _, rev := range alive {
		if first == 0 || rev < first {
			first = rev
		}
	}
	return first
}

// history returns every event under prefix from revision 1 to now, in
// order (the test's etcd is never compacted).
func history(t *testing.T, cli *clientv3.Client, prefix string) []*clientv3.Event {
	t.Helper()
	now, err := cli.Get(t.Context(), prefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	wch := cli.Watch(ctx, prefix, clientv3.WithPrefix(), clientv3.WithRev(1))
	var events []*clientv3.Event
	checkfor.Eventually(t, waitFor, time.Millisecond, func() error {
		for len(events) == 0 || events[len(events)-1].Kv.ModRevision < now.Header.Revision {
			select {
			case wr, ok := <-wch:
				if !ok || wr.Err() != nil {
					return fmt.Errorf("history watch ended: %v", wr.Err())
				}
				events = append(events, wr.Events...)
			default:
				return fmt.Errorf("history read to revision %d of %d", lastRev(events), now.Header.Revision)
			}
		}
		return nil
	})
	return events
}

func lastRev(events []*clientv3.Event) int64 {
	if len(events) == 0 {
		return 0
	}
	return events[len(events)-1].Kv.ModRevision
}
