package natsauth

import (
	"errors"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// Stats are the responder's counters since New.
type Stats struct {
	Allowed uint64            // requests answered with a user JWT
	Denied  map[string]uint64 // requests refused or dropped, by reason
}

// counters count verdicts. The maps are filled in newCounters and only
// read afterwards, so they need no lock.
type counters struct {
	allowed atomic.Uint64
	denied  map[string]*atomic.Uint64

	requests *prometheus.CounterVec // by result and reason
}

func newCounters() *counters {
	c := &counters{
		denied: make(map[string]*atomic.Uint64, len(reasons)),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "edgeset_nats_auth_requests_total",
			Help: "NATS auth callout requests, by result (allowed, denied) and reason of a denial.",
		}, []string{"result", "reason"}),
	}
	for _, r := range reasons {
		c.denied[r] = new(atomic.Uint64)
	}
	return c
}

func (c *counters) allow() {
	c.allowed.Add(1)
	c.requests.WithLabelValues("allowed", "").Inc()
}

func (c *counters) deny(reason string) {
	c.denied[reason].Add(1) // reason is always one of reasons
	c.requests.WithLabelValues("denied", reason).Inc()
}

func (c *counters) stats() Stats {
	s := Stats{Allowed: c.allowed.Load(), Denied: make(map[string]uint64, len(c.denied))}
	for r, n := range c.denied {
		if v := n.Load(); v > 0 {
			s.Denied[r] = v
		}
	}
	return s
}

// Register registers the responder's metrics in reg.
func (r *Responder) Register(reg prometheus.Registerer) error {
	return errors.Join(reg.Register(r.counters.requests))
}
