package mqttclient

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgeset/edgeset/internal/checkfor"
)

// TestRotation: round-robin from the first broker; no wait inside a round,
// Backoff between rounds and after a loss, reset by a lasting connection.
func TestRotation(t *testing.T) {
	b := Backoff{Initial: time.Second, Max: time.Minute, ResetAfter: time.Minute}
	r := newRotation(3, 1, b, rand.New(rand.NewPCG(1, 2)))

	var picks []int
	var waits []time.Duration
	for range 6 {
		picks = append(picks, r.pick())
		waits = append(waits, r.failed())
	}
	assert.Equal(t, []int{1, 2, 0, 1, 2, 0}, picks)
	assert.Equal(t, time.Duration(0), waits[0], "the round's next broker at once")
	assert.Equal(t, time.Duration(0), waits[1])
	assert.LessOrEqual(t, waits[2], b.Ceiling(0), "first full round: the first backoff window")
	assert.Equal(t, time.Duration(0), waits[3])
	assert.LessOrEqual(t, waits[5], b.Ceiling(1))
	assert.Equal(t, 2, r.rounds)

	// A connection to broker 1 that is lost moves on to broker 2 after a
	// backoff; a short one keeps the backoff growing, a lasting one resets it.
	assert.Equal(t, 1, r.pick())
	r.connected()
	assert.LessOrEqual(t, r.lost(false), b.Ceiling(2))
	assert.Equal(t, 2, r.peek(), "the next broker, not the lost one")
	assert.Equal(t, 3, r.rounds)
	assert.LessOrEqual(t, r.lost(true), b.Ceiling(0))
	assert.Equal(t, 1, r.rounds)

	// After a connection the round starts afresh: one failure is not a
	// full round even if failures preceded the connection.
	r.pick()
	r.failed()
	r.pick()
	r.connected()
	r.pick()
	assert.Equal(t, time.Duration(0), r.failed())
}

// TestRotationOfOneBroker is the single-broker behaviour: every failure
// backs off, growing.
func TestRotationOfOneBroker(t *testing.T) {
	r := newRotation(1, 0, Backoff{Initial: time.Second, Max: time.Minute}, rand.New(rand.NewPCG(3, 4)))
	for i := range 4 {
		assert.Equal(t, 0, r.pick())
		r.failed()
		assert.Equal(t, i+1, r.rounds)
	}
}

// deadURL is a tcp:// URL on which nothing listens.
func deadURL(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	return "tcp://" + addr
}

// TestFailoverToSecondBroker: connected to A, A dies; the client moves to B,
// where its subscriptions and Handler keep working and OnConnect runs again.
func TestFailoverToSecondBroker(t *testing.T) {
	_, urlA, stopA := startStoppableMochi(t)
	_, urlB := startMochi(t)
	rec := newRecorder()
	var onConnects atomic.Int32
	var lost []string
	var lostMu sync.Mutex
	opts := testOptions("", "failover")
	opts.BrokerURLs = []string{urlA, urlB}
	opts.OrderedBrokers = true
	opts.Handler = rec.handle
	opts.Subscriptions = []Subscription{{Filter: "t/#", QoS: 1}}
	opts.OnConnect = func(context.Context) { onConnects.Add(1) }
	opts.OnConnectionLost = func(err error) {
		lostMu.Lock()
		lost = append(lost, err.Error())
		lostMu.Unlock()
	}
	c := newClient(t, opts)
	startConnected(t, c)
	require.Equal(t, urlA, c.Broker())
	require.Equal(t, urlA, c.Stats().Broker)
	// Connected comes before OnConnect runs; a connection that ends first
	// skips its OnConnect (it belongs to that connection), so wait for it.
	checkfor.Eventually(t, 5*time.Second, 10*time.Millisecond, func() error {
		if n := onConnects.Load(); n != 1 {
			return fmt.Errorf("OnConnect ran %d times on A, want 1", n)
		}
		return nil
	})

	stopA()
	checkfor.Eventually(t, 10*time.Second, 10*time.Millisecond, func() error {
		if st := c.Stats(); !st.Connected || st.Broker != urlB {
			return fmt.Errorf("not on B yet: %+v", st)
		}
		return nil
	})
	pub := newClient(t, testOptions(urlB, "pub-b"))
	startConnected(t, pub)
	require.NoError(t, pub.Publish(context.Background(), "t/x", []byte("via B"), false))
	checkfor.Eventually(t, 5*time.Second, 10*time.Millisecond, func() error { return rec.expect("t/x", "via B") })
	checkfor.Eventually(t, 5*time.Second, 10*time.Millisecond, func() error {
		if n := onConnects.Load(); n != 2 {
			return fmt.Errorf("OnConnect ran %d times, want 2", n)
		}
		return nil
	})
	lostMu.Lock()
	defer lostMu.Unlock()
	require.Len(t, lost, 1)
	assert.Contains(t, lost[0], urlA, "OnConnectionLost names the broker")
	assert.Equal(t, uint64(1), c.Stats().Reconnects)
}

// TestFailoverInsideARound: the first broker refuses; the client moves to
// the second at once, not after a backoff window (an hour here, which the
// test would otherwise wait out).
func TestFailoverInsideARound(t *testing.T) {
	_, live := startMochi(t)
	dead := deadURL(t)
	opts := testOptions("", "round")
	opts.BrokerURLs = []string{dead, live}
	opts.OrderedBrokers = true
	opts.Backoff = Backoff{Initial: time.Hour, Max: time.Hour}
	c := newClient(t, opts)
	startConnected(t, c)
	st := c.Stats()
	assert.Equal(t, live, st.Broker)
	assert.Equal(t, uint64(1), st.ConnectFailures)
}

// lockedBuffer is a log sink safe for concurrent writes.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder // guarded by mu
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestFailoverRoundsBackOff: when no broker answers, every URL is tried
// in turn, and the failure logs name each broker.
func TestFailoverRoundsBackOff(t *testing.T) {
	dead1, dead2 := deadURL(t), deadURL(t)
	d := &recordingDialer{fail: errors.New("link down")}
	opts := testOptions("", "rounds")
	opts.BrokerURLs = []string{dead1, dead2}
	opts.OrderedBrokers = true
	opts.Dial = d.dial
	var log lockedBuffer
	opts.Logger = slog.New(slog.NewTextHandler(&log, nil))
	c := newClient(t, opts)
	start(t, c)
	checkfor.Eventually(t, 5*time.Second, 10*time.Millisecond, func() error {
		if addrs, _ := d.calls(); len(addrs) < 4 {
			return fmt.Errorf("%d dials, want 4", len(addrs))
		}
		return nil
	})
	addrs, _ := d.calls()
	want := []string{"tcp " + strings.TrimPrefix(dead1, "tcp://"), "tcp " + strings.TrimPrefix(dead2, "tcp://")}
	assert.Equal(t, append(want, want...), addrs[:4])
	assert.False(t, c.Connected())
	assert.Empty(t, c.Broker())
	assert.Contains(t, log.String(), "broker="+dead1)
	assert.Contains(t, log.String(), "broker="+dead2)
}

// TestRandomFirstBroker: without OrderedBrokers, clients start on a random
// broker, so a fleet spreads over the list.
func TestRandomFirstBroker(t *testing.T) {
	_, urlA := startMochi(t)
	_, urlB := startMochi(t)
	seen := map[string]int{}
	for i := range 16 {
		opts := testOptions("", fmt.Sprintf("spread-%d", i))
		opts.BrokerURLs = []string{urlA, urlB}
		c := newClient(t, opts)
		stop := startConnected(t, c)
		seen[c.Broker()]++
		stop()
	}
	// 16 fair coin flips all landing on one side: p = 2^-15.
	assert.Len(t, seen, 2, "clients on %v", seen)
}
