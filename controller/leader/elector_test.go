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

const testTTL = time.Second

func TestNewNamesEveryMissingOption(t *testing.T) {
	tests := []struct {
		name string
		opts Options
		want []string
	}{
		{"empty", Options{}, []string{"client is required", "id is required", "apiURL is required", "lead is required"}},
		{"negative ttl", Options{TTL: -time.Second}, []string{"ttl -1s is negative"}},
		{"negative retry", Options{RetryInterval: -time.Second}, []string{"retryInterval -1s is negative"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(tc.opts)
			require.Error(t, err)
			for _, w := range tc.want {
				assert.Contains(t, err.Error(), w)
			}
		})
	}
}

func TestNewAppliesDefaults(t *testing.T) {
	e, err := New(Options{Client: &clientv3.Client{}, ID: "c1", APIURL: apiURL("c1"), Lead: holdTerm})
	require.NoError(t, err)
	assert.Equal(t, DefaultPrefix, e.opts.Prefix)
	assert.Equal(t, DefaultTTL, e.opts.TTL)
	assert.Equal(t, DefaultTTL/10, e.opts.RetryInterval)
	assert.Equal(t, DefaultPrefix+"/", e.keyPrefix)
}

func TestOneOfTwoLeadsAndBothReportIt(t *testing.T) {
	srv := etcdtest.Start(t)
	check := srv.Client(t)
	a := startCandidate(t, srv.Client(t), "a", testTTL, nil)
	b := startCandidate(t, srv.Client(t), "b", testTTL, nil)
	waitCandidates(t, check, 2)

	var winner, loser *candidate
	checkfor.Eventually(t, waitFor, pollEvery, func() error {
		_, aLeads := a.e.Term()
		_, bLeads := b.e.Term()
		switch {
		case aLeads && !bLeads:
			winner, loser = a, b
		case bLeads && !aLeads:
			winner, loser = b, a
		default:
			return fmt.Errorf("a leads %v, b leads %v: want exactly one", aLeads, bLeads)
		}
		return nil
	})
	term, _ := winner.e.Term()
	require.NoError(t, term.Fenced(t.Context(), clientv3.OpPut("/test/data", "by-winner")))
	assert.Equal(t, []byte("by-winner"), etcdtest.Get(t, check, "/test/data"))
	assert.Equal(t, Info{ID: winner.id, APIURL: apiURL(winner.id)}, term.Leader)
	_, loserLeads := loser.e.Term()
	assert.False(t, loserLeads)

	for _, c := range []*candidate{a, b} {
		info, err := c.e.Leader(t.Context())
		require.NoError(t, err, c.id)
		assert.Equal(t, Info{ID: winner.id, APIURL: apiURL(winner.id)}, info, "Leader() on %s", c.id)
	}
}

func TestLeaderWithNoCandidateIsErrNoLeader(t *testing.T) {
	srv := etcdtest.Start(t)
	e, err := New(Options{Client: srv.Client(t), Prefix: "/test/leader", ID: "a", APIURL: apiURL("a"), Lead: holdTerm})
	require.NoError(t, err)
	_, err = e.Leader(t.Context())
	require.ErrorIs(t, err, ErrNoLeader)
}

func TestTxnNestsTheCallersCompares(t *testing.T) {
	srv := etcdtest.Start(t)
	check := srv.Client(t)
	term := startCandidate(t, srv.Client(t), "a", testTTL, nil).waitLeading(t)
	missing := clientv3.Compare(clientv3.CreateRevision("/test/data"), "=", 0)

	resp, err := term.Txn(t.Context(), []clientv3.Cmp{missing},
		[]clientv3.Op{clientv3.OpPut("/test/data", "first")}, nil)
	require.NoError(t, err)
	assert.True(t, resp.Succeeded)

	resp, err = term.Txn(t.Context(), []clientv3.Cmp{missing},
		[]clientv3.Op{clientv3.OpPut("/test/data", "second")}, []clientv3.Op{clientv3.OpGet("/test/data")})
	require.NoError(t, err, "a failed compare of the caller's is no fencing error")
	assert.False(t, resp.Succeeded)
	require.Len(t, resp.Responses, 1)
	assert.Equal(t, []byte("first"), resp.Responses[0].GetResponseRange().Kvs[0].Value)
	assert.Equal(t, []byte("first"), etcdtest.Get(t, check, "/test/data"))
}

func TestTakeoverWhenTheLeadersSessionIsRevoked(t *testing.T) {
	srv := etcdtest.Start(t)
	check := srv.Client(t)
	a := startCandidate(t, srv.Client(t), "a", testTTL, nil)
	old := a.waitLeading(t)
	b := startCandidate(t, srv.Client(t), "b", testTTL, nil)
	waitCandidates(t, check, 2)

	_, err := check.Revoke(t.Context(), old.Lease)
	require.NoError(t, err)
	b.waitLeading(t)

	cause := waitEnded(t, old)
	assert.True(t, isAny(cause, ErrSessionLost, ErrKeyLost), "cause %v", cause)
	put := clientv3.OpPut("/test/data", "late")
	require.ErrorIs(t, old.Fenced(t.Context(), put), ErrNotLeader)
	_, err = old.fencedTxn(t.Context(), nil, []clientv3.Op{put}, nil)
	require.ErrorIs(t, err, ErrNotLeader, "etcd itself refuses the old term's write")
	assert.Nil(t, etcdtest.Get(t, check, "/test/data"))

	checkfor.Eventually(t, waitFor, pollEvery, func() error {
		info, err := a.e.Leader(t.Context())
		if err != nil || info.ID != "b" {
			return fmt.Errorf("a sees leader %+v (%v), want b", info, err)
		}
		return nil
	})
}

func TestShutdownResignsSoAStandbyTakesOverAtOnce(t *testing.T) {
	// The TTL is far longer than the wait for b: only a resign explains b
	// leading in time.
	const longTTL = 60 * time.Second
	srv := etcdtest.Start(t)
	check := srv.Client(t)
	a := startCandidate(t, srv.Client(t), "a", longTTL, nil)
	term := a.waitLeading(t)
	b := startCandidate(t, srv.Client(t), "b", longTTL, nil)
	waitCandidates(t, check, 2)

	a.stop()
	assert.ErrorIs(t, context.Cause(term.Context()), ErrResigned)
	_, aLeads := a.e.Term()
	assert.False(t, aLeads)
	b.waitLeading(t)
	ttl, err := check.TimeToLive(t.Context(), term.Lease)
	require.NoError(t, err)
	assert.EqualValues(t, -1, ttl.TTL, "a's lease is revoked")
}

func TestLeadReturningEarlyResignsAndCampaignsAgain(t *testing.T) {
	srv := etcdtest.Start(t)
	calls := make(chan struct{}, 8)
	a := startCandidate(t, srv.Client(t), "a", testTTL, func(ctx context.Context, _ *Term) error {
		calls <- struct{}{}
		if len(calls) == 1 {
			return errors.New("leader-only work failed")
		}
		<-ctx.Done()
		return nil
	})
	checkfor.Eventually(t, waitFor, pollEvery, func() error {
		if terms := a.allTerms(); len(terms) < 2 {
			return fmt.Errorf("%d terms, want 2", len(terms))
		}
		return nil
	})
	terms := a.allTerms()
	assert.ErrorIs(t, context.Cause(terms[0].Context()), ErrResigned)
	assert.NotEqual(t, terms[0].Lease, terms[1].Lease, "each term has its own session")
	assert.Greater(t, terms[1].Rev, terms[0].Rev)
}

// TestTermOutlivesALongCampaign: a standby that campaigned for longer
// than the TTL keeps the term it wins. Its lease deadline ran from the
// grant, so the term ended the moment it began (found by the HA fault
// test: every takeover after a long standby cost a second round).
func TestTermOutlivesALongCampaign(t *testing.T) {
	const ttl = time.Second
	srv := etcdtest.Start(t)
	a := startCandidate(t, srv.Client(t), "a", ttl, nil)
	a.waitLeading(t)
	b := startCandidate(t, srv.Client(t), "b", ttl, nil)
	waitCandidates(t, srv.Client(t), 2)
	time.Sleep(3 * ttl) // the campaign outlasts the TTL: the condition under test, not a wait
	a.stop()
	b.waitLeading(t)
	first := b.allTerms()[0]
	select {
	case <-first.Context().Done():
		t.Fatalf("b's first term ended: %v", context.Cause(first.Context()))
	case <-time.After(2 * ttl):
	}
}
