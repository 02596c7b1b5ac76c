package leader

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/edgeset/edgeset/internal/checkfor"
	"github.com/edgeset/edgeset/internal/etcdtest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// newTestElector returns an elector that is not run, for driving its steps.
func newTestElector(t *testing.T, cli *clientv3.Client, id string, ttl time.Duration) *Elector {
	t.Helper()
	e, err := New(Options{Client: cli, Prefix: "/test/leader", ID: id, APIURL: apiURL(id), TTL: ttl, Lead: holdTerm})
	require.NoError(t, err)
	return e
}

// Pitfall (a): a campaign blocked behind a leader must end when its own
// session's lease goes, not wait on and report a win later.
func TestCampaignEndsWithItsSession(t *testing.T) {
	srv := etcdtest.Start(t)
	check := srv.Client(t)
	startCandidate(t, srv.Client(t), "a", testTTL, nil).waitLeading(t)
	b := newTestElector(t, srv.Client(t), "b", testTTL)
	sess, err := b.newSession(t.Context())
	require.NoError(t, err)
	defer b.closeSession(sess)

	result := make(chan error, 1)
	go func() {
		_, err := b.campaign(t.Context(), sess)
		result <- err
	}()
	waitCandidates(t, check, 2)
	_, err = check.Revoke(t.Context(), sess.Lease())
	require.NoError(t, err)

	var campaignErr error
	checkfor.Eventually(t, waitFor, pollEvery, func() error {
		select {
		case campaignErr = <-result:
			return nil
		default:
			return fmt.Errorf("campaign still waiting after its lease was revoked")
		}
	})
	require.ErrorIs(t, campaignErr, ErrSessionLost)
}

// Pitfall (a): Campaign can return success after the session's key is
// gone; confirm must catch it whatever removed the key.
func TestConfirmRejectsACampaignWhoseKeyIsGone(t *testing.T) {
	tests := []struct {
		name string
		lose func(t *testing.T, cli *clientv3.Client, s *session, key string)
	}{
		{"key deleted", func(t *testing.T, cli *clientv3.Client, _ *session, key string) {
			_, err := cli.Delete(t.Context(), key)
			require.NoError(t, err)
		}},
		{"key recreated at a later revision", func(t *testing.T, cli *clientv3.Client, s *session, key string) {
			_, err := cli.Delete(t.Context(), key)
			require.NoError(t, err)
			_, err = cli.Put(t.Context(), key, "{}", clientv3.WithLease(s.Lease()))
			require.NoError(t, err)
		}},
		{"lease revoked", func(t *testing.T, cli *clientv3.Client, s *session, _ string) {
			_, err := cli.Revoke(t.Context(), s.Lease())
			require.NoError(t, err)
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := etcdtest.Start(t)
			check := srv.Client(t)
			e := newTestElector(t, srv.Client(t), "a", testTTL)
			sess, err := e.newSession(t.Context())
			require.NoError(t, err)
			defer e.closeSession(sess)
			c, err := e.campaign(t.Context(), sess)
			require.NoError(t, err)
			require.NoError(t, e.confirm(t.Context(), sess, c.key, c.rev), "confirm of a live campaign")

			tc.lose(t, check, sess, c.key)
			err = e.confirm(t.Context(), sess, c.key, c.rev)
			assert.True(t, isAny(err, ErrKeyLost, ErrSessionLost), "confirm: %v", err)
		})
	}
}

// Pitfall (a), end to end: a standby whose lease is revoked while it waits
// never leads on that lease, and leads on a new one once the leader goes.
func TestStandbyWhoseLeaseExpiredWhileWaitingLeadsOnlyOnANewLease(t *testing.T) {
	srv := etcdtest.Start(t)
	check := srv.Client(t)
	a := startCandidate(t, srv.Client(t), "a", testTTL, nil)
	aTerm := a.waitLeading(t)
	b := startCandidate(t, srv.Client(t), "b", testTTL, nil)
	var revoked clientv3.LeaseID
	for _, kv := range waitCandidates(t, check, 2).Kvs {
		if clientv3.LeaseID(kv.Lease) != aTerm.Lease {
			revoked = clientv3.LeaseID(kv.Lease)
		}
	}
	_, err := check.Revoke(t.Context(), revoked)
	require.NoError(t, err)
	waitCandidates(t, check, 2) // b campaigns again on a new session

	a.stop()
	bTerm := b.waitLeading(t)
	for _, term := range b.allTerms() {
		assert.NotEqual(t, revoked, term.Lease, "b led on the revoked lease")
	}
	resp, err := check.Get(t.Context(), bTerm.Key)
	require.NoError(t, err)
	require.Len(t, resp.Kvs, 1, "b's leader key exists")
	assert.Equal(t, bTerm.Rev, resp.Kvs[0].CreateRevision)
}

// Pitfall (b): a watch that misses the deletion of the leader key. Muted,
// the watch delivers nothing; compacted, it ends with an error. The
// Observer re-reads on the error, or at its resync, and reports no leader.
func TestObserverSeesADeletionItsWatchMissed(t *testing.T) {
	tests := []struct {
		name    string
		resync  time.Duration
		compact bool
	}{
		// resync far beyond waitFor: only the watch error can explain it.
		{"watch compacted", time.Hour, true},
		{"watch silent", 100 * time.Millisecond, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := etcdtest.Start(t)
			a := startCandidate(t, srv.Client(t), "a", testTTL, nil)
			a.waitLeading(t)
			cli := srv.Client(t)
			fw := installFaultyWatcher(cli)
			o := NewObserver(cli, "/test/leader", tc.resync)
			ctx, cancel := context.WithCancel(t.Context())
			done := make(chan error, 1)
			go func() { done <- o.Run(ctx) }()
			defer func() { cancel(); require.NoError(t, <-done) }()
			checkfor.Eventually(t, waitFor, pollEvery, func() error {
				if info, ok := o.Leader(); !ok || info.ID != "a" {
					return fmt.Errorf("observer sees %+v (%v), want a", info, ok)
				}
				return nil
			})

			fw.Mute()
			a.stop()
			if tc.compact {
				_, ok := o.Leader()
				assert.True(t, ok, "the muted watch hid the deletion")
				fw.Break()
			}
			checkfor.Eventually(t, waitFor, pollEvery, func() error {
				if info, ok := o.Leader(); ok {
					return fmt.Errorf("observer still sees %+v", info)
				}
				return nil
			})
		})
	}
}

// Pitfall (b) for the leader itself: its key deleted by someone while its
// watch is muted, then compacted. The term ends with ErrKeyLost although the
// session lives on.
func TestTermEndsWhenItsKeyIsDeletedAndTheWatchMissedIt(t *testing.T) {
	// The key guard resyncs every TTL/3 = 20 s, beyond waitFor: only the
	// watch error can explain the term ending in time.
	const longTTL = 60 * time.Second
	srv := etcdtest.Start(t)
	check := srv.Client(t)
	cli := srv.Client(t)
	fw := installFaultyWatcher(cli)
	term := startCandidate(t, cli, "a", longTTL, nil).waitLeading(t)
	fw.waitWatching(t) // the key guard has read the key and watches it

	fw.Mute()
	_, err := check.Delete(t.Context(), term.Key)
	require.NoError(t, err)
	require.NoError(t, context.Cause(term.Context()), "the muted watch hid the deletion")
	fw.Break()
	assert.ErrorIs(t, waitEnded(t, term), ErrKeyLost)
}

// Pitfall (c): a leader partitioned from etcd stops acting before etcd can
// expire its lease, so before a successor is elected; its writes, late or
// not, never land.
func TestPartitionedLeaderStopsBeforeItsSuccessorStarts(t *testing.T) {
	srv := etcdtest.Start(t)
	check := srv.Client(t)
	proxy := etcdtest.NewProxy(t, srv.Endpoint())
	a := startCandidate(t, etcdtest.NewClient(t, proxy.Endpoint()), "a", testTTL, nil)
	old := a.waitLeading(t)

	oldEndedFirst := make(chan bool, 1)
	b := startCandidate(t, srv.Client(t), "b", testTTL, func(ctx context.Context, _ *Term) error {
		select {
		case oldEndedFirst <- old.Context().Err() != nil:
		default:
		}
		<-ctx.Done()
		return nil
	})
	waitCandidates(t, check, 2)

	proxy.Cut()
	inFlight := make(chan error, 1)
	go func() { // no deadline of its own: only the term's end can end it
		inFlight <- old.Fenced(context.Background(), clientv3.OpPut("/test/data", "in flight"))
	}()
	b.waitLeading(t)
	assert.True(t, <-oldEndedFirst, "a's term had ended when b's began")
	checkfor.Eventually(t, waitFor, pollEvery, func() error {
		select {
		case err := <-inFlight:
			if err == nil {
				return errors.New("a write through the cut proxy succeeded")
			}
			return nil
		default:
			return errors.New("the write in flight outlives its term")
		}
	})
	// The client's own keep-alive gives up a full TTL after its last
	// response; the elector's deadline runs from the last renewal sent,
	// less a tenth of the TTL, so it ends the term first.
	assert.ErrorIs(t, context.Cause(old.Context()), ErrLeaseDeadline)
	put := clientv3.OpPut("/test/data", "late")
	require.ErrorIs(t, old.Fenced(t.Context(), put), ErrNotLeader)

	proxy.Restore()
	checkfor.Eventually(t, waitFor, pollEvery, func() error {
		_, err := old.fencedTxn(t.Context(), nil, []clientv3.Op{put}, nil)
		if !isAny(err, ErrNotLeader) {
			return fmt.Errorf("late write of the old term through the healed proxy: %v", err)
		}
		return nil
	})
	assert.Nil(t, etcdtest.Get(t, check, "/test/data"))
	checkfor.Eventually(t, waitFor, pollEvery, func() error {
		info, err := a.e.Leader(t.Context())
		if err != nil || info.ID != "b" {
			return fmt.Errorf("a sees leader %+v (%v), want b", info, err)
		}
		return nil
	})
}
