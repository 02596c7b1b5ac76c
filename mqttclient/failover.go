package mqttclient

import (
	"math/rand/v2"
	"time"
)

// rotation picks the broker of every connection attempt and the wait
// before it. Attempts go round-robin over the brokers. A round is one
// attempt on each broker: within a round a failed attempt moves to the
// next broker at once, and Backoff applies between rounds, so a dead node
// costs a client one failed attempt, not a backoff window, while a client
// that reaches no node at all backs off exactly as with one broker. A lost
// connection ends a round too: the client waits Backoff (jittered, so the
// clients of a dead node do not fall on the survivors in one instant) and
// then tries the next broker, not the one it lost. It is pure given rnd.
type rotation struct {
	n       int // brokers, at least 1
	next    int // index of the next attempt's broker
	tried   int // failed attempts in the current round
	rounds  int // Backoff's attempt number: failed rounds and losses since a lasting connection
	backoff Backoff
	rnd     *rand.Rand
}

// newRotation starts at broker first of n.
func newRotation(n, first int, b Backoff, rnd *rand.Rand) *rotation {
	return &rotation{n: n, next: first % n, backoff: b, rnd: rnd}
}

// pick returns the broker of the next attempt and advances past it.
func (r *rotation) pick() int {
	i := r.next
	r.next = (r.next + 1) % r.n
	return i
}

// peek returns the broker the next pick returns.
func (r *rotation) peek() int { return r.next }

// failed records a failed attempt and returns the wait before the next:
// zero while the round has untried brokers, Backoff when it is complete.
func (r *rotation) failed() time.Duration {
	r.tried++
	if r.tried < r.n {
		return 0
	}
	return r.endRound()
}

// connected records an established connection: the next round is fresh.
func (r *rotation) connected() { r.tried = 0 }

// lost records the end of a connection and returns the wait before the
// next attempt. lasted reports whether the connection lasted
// Backoff.ResetAfter; then the backoff starts again from Initial.
func (r *rotation) lost(lasted bool) time.Duration {
	if lasted {
		r.rounds = 0
	}
	return r.endRound()
}

// endRound starts a new round and returns its Backoff delay.
func (r *rotation) endRound() time.Duration {
	r.tried = 0
	d := r.backoff.Delay(r.rounds, r.rnd)
	r.rounds++
	return d
}
