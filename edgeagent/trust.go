package edgeagent

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/edgeset/edgeset/schema"
	"github.com/edgeset/edgeset/signing"
)

// Signed desired state (issue 18). With Config.TrustRoot set, the agent
// accepts a desired state, revision, ConfigMap or Secret only in an
// envelope signed by an online key of the newest key set the fleet root
// signed (package signing), for this node's topic (or, for revisions and
// ConfigMaps, any node), of a generation not below the last accepted, and
// not expired. Anything else is refused: counted (Refusals), reported as
// a Warning node event whose reason is signing.Reason, and dropped; the
// agent keeps running what it last accepted. Without a TrustRoot it takes
// plain messages as before: the insecure mode, where whoever can publish
// on the broker controls the device.

// keySetFile is where the accepted key set is kept in DataDir.
const keySetFile = "keyset.json"

// maxHeld bounds the documents held for a key set that has not arrived.
const maxHeld = 64

// refusalEventInterval is the least time between two refusal events of
// one reason; the ones in between are counted in the next.
const refusalEventInterval = 10 * time.Second

// trustState is the agent's verification state; loop-owned but for the
// counters, which mu guards.
type trustState struct {
	trust *signing.Trust
	path  string            // the key set file; "" for an ephemeral agent
	held  map[string][]byte // documents signed by a key not (yet) known, by topic

	// requests opens signed requests (signedrequests.go); safe for
	// concurrent use.
	requests *requestGate

	mu         sync.Mutex
	version    uint64               // of the accepted key set, for KeySetVersion
	keySet     *signing.KeySet      // the accepted key set, for requests; nil before the first
	refused    map[string]uint64    // by reason
	lastEvent  map[string]time.Time // by reason
	suppressed map[string]int       // events not sent since the last, by reason
	queued     []queuedEvent        // refusal events for the loop to send (signedrequests.go)
}

// newTrustState pins root and restores the key set persisted in dataDir.
// Requests issued before started are refused (the accepted ones were
// remembered by an earlier process).
func newTrustState(root ed25519.PublicKey, dataDir string, ephemeral bool, started time.Time, log func(msg string, args ...any)) *trustState {
	ts := &trustState{trust: signing.NewTrust(root), held: map[string][]byte{}, requests: newRequestGate(started),
		refused: map[string]uint64{}, lastEvent: map[string]time.Time{}, suppressed: map[string]int{}}
	if ephemeral {
		return ts
	}
	ts.path = filepath.Join(dataDir, keySetFile)
	env, err := signing.ReadKeySetFile(ts.path)
	if err == nil && env != nil {
		err = ts.trust.Restore(env)
	}
	if err == nil && ts.trust.KeySet != nil {
		ts.version, ts.keySet = ts.trust.KeySet.Version, ts.trust.KeySet
	}
	if err != nil {
		log("the persisted key set cannot be used; waiting for the controller's", "file", ts.path, "err", err)
	}
	return ts
}

// Refusals returns how many signed documents the agent refused, by
// reason (signing.Reason); nil in the insecure mode.
func (a *Agent) Refusals() map[string]uint64 {
	if a.trust == nil {
		return nil
	}
	a.trust.mu.Lock()
	defer a.trust.mu.Unlock()
	out := make(map[string]uint64, len(a.trust.refused))
	for k, v := range a.trust.refused {
		out[k] = v
	}
	return out
}

// KeySetVersion is the version of the accepted key set; 0 for none.
func (a *Agent) KeySetVersion() uint64 {
	if a.trust == nil {
		return 0
	}
	a.trust.mu.Lock()
	defer a.trust.mu.Unlock()
	return a.trust.version
}

// handleKeySet adopts a newer key set signed by the root, persists it, and
// gives the held documents another try.
func (a *Agent) handleKeySet(ctx context.Context, b []byte) bool {
	if len(b) == 0 {
		return true
	}
	next := *a.trust.trust // adopted only once persisted
	changed, err := next.AcceptKeySet(b)
	if err != nil {
		a.refuseDocument(ctx, schema.KeySetTopic, err)
		return true
	}
	if !changed {
		return true
	}
	if a.trust.path != "" {
		if err := signing.WriteKeySetFile(a.trust.path, b); err != nil {
			a.log.Error("cannot persist key set; will retry", "err", err)
			return false
		}
	}
	*a.trust.trust = next
	a.trust.mu.Lock()
	a.trust.version, a.trust.keySet = next.KeySet.Version, next.KeySet
	a.trust.mu.Unlock()
	ks := a.trust.trust.KeySet
	a.log.Info("accepted key set", "version", ks.Version, "keys", len(ks.Keys), "revoked", len(ks.Revoked))
	for topic, held := range a.trust.held {
		a.requeue(topic, held)
	}
	clear(a.trust.held)
	a.poke()
	return true
}

// verified returns the body of the signed document b received on topic,
// or ok false when it is refused (reported) or held for a key set.
func (a *Agent) verified(ctx context.Context, topic string, b []byte) (body []byte, ok bool) {
	if a.trust == nil {
		return b, true
	}
	if len(b) == 0 {
		return b, true // a cleared retained topic carries nothing to trust
	}
	exp := signing.Expect{Topic: topic, Node: a.cfg.NodeName}
	desired := topic == a.desiredTopic()
	switch {
	case desired:
		if a.desired != nil {
			exp.MinGeneration = a.desired.Generation
		}
	case strings.HasPrefix(topic, schema.RevisionTopic("")), strings.HasPrefix(topic, schema.ConfigMapTopic("")):
		exp.Shared = true
	}
	st, err := signing.Verifier{Cache: a.cfg.SignatureCache}.Verify(a.trust.trust.KeySet, b, exp, a.now())
	if err == nil && desired {
		err = checkGeneration(st)
	}
	if err == nil {
		return st.Body, true
	}
	if errors.Is(err, signing.ErrUnknownKey) {
		if len(a.trust.held) < maxHeld || a.trust.held[topic] != nil {
			a.trust.held[topic] = b
		}
		if a.trust.trust.KeySet == nil {
			a.log.Debug("holding a signed document until the key set arrives", "topic", topic)
			return nil, false
		}
	}
	a.refuseDocument(ctx, topic, err)
	return nil, false
}

// checkGeneration verifies that a desired state's statement and body
// carry the same generation.
func checkGeneration(st signing.Statement) error {
	var g struct {
		Generation uint64 `json:"generation"`
	}
	if err := json.Unmarshal(st.Body, &g); err != nil {
		return fmt.Errorf("%w: body: %v", signing.ErrMalformed, err)
	}
	if g.Generation != st.Generation {
		return fmt.Errorf("%w: statement generation %d, body generation %d", signing.ErrMalformed, st.Generation, g.Generation)
	}
	return nil
}

// refuseDocument counts a refused document, and logs and reports it to
// the controller as a node event at most once per reason and
// refusalEventInterval (the next carries how many were not reported).
func (a *Agent) refuseDocument(ctx context.Context, topic string, err error) {
	if msg, report := a.countRefusal(topic, err, "keeping the last accepted state"); report {
		a.event(ctx, schema.EventWarning, signing.Reason(err), "", msg)
	}
}

// countRefusal counts a refusal of what came on topic, and says whether
// to report it now (at most once per reason and refusalEventInterval),
// logging it either way; msg is the event's message, ending with outcome
// (what the agent did instead) and how many refusals of the reason were
// not reported since the last report.
func (a *Agent) countRefusal(topic string, err error, outcome string) (msg string, report bool) {
	reason := signing.Reason(err)
	now := a.now()
	ts := a.trust
	ts.mu.Lock()
	ts.refused[reason]++
	send := now.Sub(ts.lastEvent[reason]) >= refusalEventInterval || now.Before(ts.lastEvent[reason])
	suppressed := 0
	if send {
		ts.lastEvent[reason], suppressed, ts.suppressed[reason] = now, ts.suppressed[reason], 0
	} else {
		ts.suppressed[reason]++
	}
	ts.mu.Unlock()
	if !send { // a flood of refusals is counted, not logged line by line
		a.log.Debug("refused a signed message", "topic", topic, "reason", reason, "err", err)
		return "", false
	}
	a.log.Warn("refused a signed message; "+outcome, "topic", topic, "reason", reason, "err", err)
	msg = fmt.Sprintf("refused %s: %v; %s", topic, err, outcome)
	if suppressed > 0 {
		msg += fmt.Sprintf(" (%d more refusals of this reason since the last report)", suppressed)
	}
	return msg, true
}
