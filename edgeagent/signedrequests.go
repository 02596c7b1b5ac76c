package edgeagent

import (
	"context"
	"sync"
	"time"

	"github.com/edgeset/edgeset/schema"
	"github.com/edgeset/edgeset/signing"
)

// Signed requests (issue 18). With Config.TrustRoot set, what the
// controller asks the device to do now must be signed as its desired
// state is: an exec request (and its cancel), each input chunk of an
// interactive session, and a log request (and its cancel). Each is an
// envelope signed by an online key of the accepted key set, for the topic
// it came on (which names this node, and for input the session), issued
// at most signing.MaxRequestLifetime before its expiry and not expired.
// An exec or log request is accepted once: the agent remembers each one it
// accepted until it expires (signing.RequestGuard, at most
// signing.DefaultRequestMemory of them) and refuses it again as a replay,
// as it refuses one issued before the agent started. An input chunk is
// opened without that memory: its topic binds it to a session that lives
// only while it runs, and the session drops a sequence number it already
// took (execinput.go). Anything else is refused as a document is
// (counted in Refusals, reported as a Warning node event, logged), and
// nothing runs, nothing is read, nothing is answered. Without a
// TrustRoot requests are taken plain, as everything else: the insecure
// mode.

// requestGate opens the signed requests of one agent; safe for
// concurrent use (requests come on the MQTT handler's goroutine, the key
// set changes on the loop's).
type requestGate struct {
	mu    sync.Mutex
	guard *signing.RequestGuard
}

func newRequestGate(started time.Time) *requestGate {
	return &requestGate{guard: signing.NewRequestGuard(started, signing.DefaultRequestMemory)}
}

func (g *requestGate) open(ks *signing.KeySet, env []byte, exp signing.Expect, now time.Time, once bool) (signing.Statement, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.guard.Open(ks, env, exp, now, once)
}

// maxQueuedRefusals bounds the refusal events waiting for the loop; at
// most one per reason and refusalEventInterval is queued anyway.
const maxQueuedRefusals = 32

// queuedEvent is a refusal event for the loop to send.
type queuedEvent struct {
	reason, msg string
}

// OpenRequest returns the request a controller sent on topic (the node's
// exec/request, logs/request or a session's exec/input/{id}) as the
// request's servers take it: with a TrustRoot the body of a signed
// request, verified and, but for input chunks, not seen before; ok false
// when it is refused (counted, reported, and nothing is to be done).
// Without a TrustRoot it is payload as it came. It never blocks on I/O:
// the refusal's node event is sent by the agent's loop.
func (a *Agent) OpenRequest(topic string, payload []byte) (body []byte, ok bool) {
	ts := a.trust
	if ts == nil {
		return payload, true
	}
	ts.mu.Lock()
	ks := ts.keySet
	ts.mu.Unlock()
	_, _, input := schema.ParseExecInputTopic(topic)
	st, err := ts.requests.open(ks, payload, signing.Expect{Topic: topic, Node: a.cfg.NodeName}, a.now(), !input)
	if err != nil {
		a.refuseRequest(topic, err)
		return nil, false
	}
	return st.Body, true
}

// refuseRequest counts a refused request and queues its node event, when
// one is due, for the loop.
func (a *Agent) refuseRequest(topic string, err error) {
	msg, report := a.countRefusal(topic, err, "nothing was run or sent")
	if !report {
		return
	}
	ts := a.trust
	ts.mu.Lock()
	if len(ts.queued) < maxQueuedRefusals {
		ts.queued = append(ts.queued, queuedEvent{reason: signing.Reason(err), msg: msg})
	}
	ts.mu.Unlock()
	a.poke()
}

// reportRequestRefusals sends the queued refusal events.
func (a *Agent) reportRequestRefusals(ctx context.Context) {
	if a.trust == nil {
		return
	}
	a.trust.mu.Lock()
	queued := a.trust.queued
	a.trust.queued = nil
	a.trust.mu.Unlock()
	for _, ev := range queued {
		a.event(ctx, schema.EventWarning, ev.reason, "", ev.msg)
	}
}
