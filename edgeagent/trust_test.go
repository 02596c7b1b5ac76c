package edgeagent_test

import (
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgeset/edgeset/internal/checkfor"
	"github.com/edgeset/edgeset/schema"
	"github.com/edgeset/edgeset/signing"
)

// fleetKeys are a test fleet's root and online keys.
type fleetKeys struct {
	root, online, attacker ed25519.PrivateKey
}

func testKey(b byte) ed25519.PrivateKey {
	seed := make([]byte, ed25519.SeedSize)
	for i := range seed {
		seed[i] = b
	}
	return ed25519.NewKeyFromSeed(seed)
}

func newFleetKeys() fleetKeys {
	return fleetKeys{root: testKey(1), online: testKey(2), attacker: testKey(9)}
}

func pub(k ed25519.PrivateKey) ed25519.PublicKey { return k.Public().(ed25519.PublicKey) }

// keySet signs a key set of version v delegating keys until far ahead.
func (f fleetKeys) keySet(t *testing.T, v uint64, revoked []string, keys ...ed25519.PrivateKey) []byte {
	t.Helper()
	ks := signing.KeySet{Version: v, Revoked: revoked}
	for _, k := range keys {
		ks.Keys = append(ks.Keys, signing.OnlineKey{ID: signing.KeyID(pub(k)), PublicKey: pub(k), Expires: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)})
	}
	b, err := signing.SignKeySet(f.root, ks)
	require.NoError(t, err)
	return b
}

// signed wraps v, published on topic for node, in an envelope signed by k,
// valid from now for a day.
func signed(t *testing.T, k ed25519.PrivateKey, topic, node string, gen uint64, now time.Time, v any) []byte {
	t.Helper()
	b, err := signing.NewSigner(k).Sign(signing.Statement{Topic: topic, Node: node, Generation: gen,
		IssuedAt: now, ExpiresAt: now.Add(24 * time.Hour), Body: mustJSON(t, v)})
	require.NoError(t, err)
	return b
}

func desiredState(node string, gen uint64, ins ...schema.DesiredInstance) schema.DesiredState {
	return schema.DesiredState{SchemaVersion: schema.WireVersion, Node: node, Generation: gen, Instances: ins}
}

// refusalEvents returns the reasons of the node events the agent published.
func refusalEvents(t *testing.T, h *harness) []string {
	t.Helper()
	var out []string
	for _, p := range h.conn.published(schema.NodeTopic(testNode, schema.TopicEvents)) {
		var ev schema.NodeEvent
		require.NoError(t, json.Unmarshal(p.payload, &ev))
		out = append(out, ev.Reason)
	}
	return out
}

func waitRefused(t *testing.T, h *harness, reason string, n uint64) {
	t.Helper()
	checkfor.Eventually(t, 5*time.Second, 5*time.Millisecond, func() error {
		if got := h.agent.Refusals()[reason]; got < n {
			return fmt.Errorf("%s refused %d times, want %d (all: %v)", reason, got, n, h.agent.Refusals())
		}
		return nil
	})
}

// TestSignedDesiredState drives one agent that pins the root through what
// a hostile broker can send: each refused, counted, reported, and the
// agent keeps running the last state it accepted.
func TestSignedDesiredState(t *testing.T) {
	keys := newFleetKeys()
	h := newHarness(t)
	cfg := h.config()
	cfg.TrustRoot = pub(keys.root)
	h.start(cfg)
	h.connect()
	assert.True(t, h.conn.subscribed(schema.KeySetTopic), "an agent pinning the root reads the key set")

	desiredTopic := schema.NodeTopic(testNode, schema.TopicDesired)
	now := h.clock.Now()
	rev1 := testRevision("default/web", testTemplate("busybox:1.36"))
	rev2 := testRevision("default/web", testTemplate("busybox:1.37"))

	// A signed document before any key set is held, then accepted once
	// the key set comes.
	h.agent.HandleMessage(desiredTopic, signed(t, keys.online, desiredTopic, testNode, 1, now, desiredState(testNode, 1, want(rev1))))
	h.waitPasses(2)
	h.agent.HandleMessage(schema.KeySetTopic, keys.keySet(t, 1, nil, keys.online))
	checkfor.Eventually(t, 5*time.Second, 5*time.Millisecond, func() error {
		if !h.conn.subscribed(schema.RevisionTopic(rev1.Hash)) {
			return errors.New("desired state not accepted yet")
		}
		return nil
	})
	h.agent.HandleMessage(schema.RevisionTopic(rev1.Hash), signed(t, keys.online, schema.RevisionTopic(rev1.Hash), signing.AnyNode, 0, now, rev1))
	h.waitInstance("default/web", rev1.Hash, runningReady)
	assert.Equal(t, uint64(1), h.agent.KeySetVersion())
	assert.Empty(t, h.agent.Refusals(), "nothing refused so far")

	gen2 := desiredState(testNode, 2, want(rev2))
	other := schema.NodeTopic("gw-2", schema.TopicDesired)
	attacks := []struct {
		name    string
		topic   string
		payload []byte
		reason  string
	}{
		{"unsigned", desiredTopic, mustJSON(t, gen2), "SignedDocumentMissing"},
		{"forged by the attacker's key", desiredTopic, signed(t, keys.attacker, desiredTopic, testNode, 2, now, gen2), "SigningKeyUnknown"},
		{"forged revision", schema.RevisionTopic(rev2.Hash), signed(t, keys.attacker, schema.RevisionTopic(rev2.Hash), signing.AnyNode, 0, now, rev2), "SigningKeyUnknown"},
		{"cross-node: gw-2's document on gw-1's topic", desiredTopic,
			signed(t, keys.online, other, "gw-2", 2, now, desiredState("gw-2", 2, want(rev2))), "SignedDocumentWrongTopic"},
		{"expired", desiredTopic, signed(t, keys.online, desiredTopic, testNode, 2, now.Add(-48*time.Hour), gen2), "SignedDocumentExpired"},
		{"generation mismatch", desiredTopic, signed(t, keys.online, desiredTopic, testNode, 7, now, gen2), "SignedDocumentMalformed"},
		{"key set by another root", schema.KeySetTopic, keysOfRoot(t, keys.attacker, keys.attacker), "KeySetNotSignedByRoot"},
	}
	for _, a := range attacks {
		t.Run(a.name, func(t *testing.T) {
			before := h.agent.Refusals()[a.reason]
			h.agent.HandleMessage(a.topic, a.payload)
			waitRefused(t, h, a.reason, before+1)
		})
	}
	h.waitPasses(2)
	h.waitInstance("default/web", rev1.Hash, runningReady)
	assert.Len(t, h.managed(), 1, "still one container: the first revision")
	reported := refusalEvents(t, h)
	for _, a := range attacks {
		assert.Contains(t, reported, a.reason, "reported as a node event")
	}

	// The genuine generation 2, then a replay of generation 1 and a
	// downgrade of the key set.
	h.agent.HandleMessage(desiredTopic, signed(t, keys.online, desiredTopic, testNode, 2, now, gen2))
	h.agent.HandleMessage(schema.RevisionTopic(rev2.Hash), signed(t, keys.online, schema.RevisionTopic(rev2.Hash), signing.AnyNode, 0, now, rev2))
	h.waitInstance("default/web", rev2.Hash, runningReady)
	h.agent.HandleMessage(desiredTopic, signed(t, keys.online, desiredTopic, testNode, 1, now, desiredState(testNode, 1, want(rev1))))
	waitRefused(t, h, "SignedDocumentRollback", 1)
	h.agent.HandleMessage(schema.KeySetTopic, keys.keySet(t, 2, nil, keys.online))
	checkfor.Eventually(t, 5*time.Second, 5*time.Millisecond, func() error {
		if h.agent.KeySetVersion() != 2 {
			return errors.New("key set 2 not accepted")
		}
		return nil
	})
	h.agent.HandleMessage(schema.KeySetTopic, keys.keySet(t, 1, nil, keys.online))
	waitRefused(t, h, "KeySetDowngrade", 1)

	// Across a restart: the key set and the generation stay.
	h.stop()
	h.start(cfg)
	h.connect()
	assert.Equal(t, uint64(2), h.agent.KeySetVersion(), "the key set is persisted")
	h.agent.HandleMessage(desiredTopic, signed(t, keys.online, desiredTopic, testNode, 1, now, desiredState(testNode, 1, want(rev1))))
	waitRefused(t, h, "SignedDocumentRollback", 1)
	h.agent.HandleMessage(schema.KeySetTopic, keys.keySet(t, 1, nil, keys.online))
	waitRefused(t, h, "KeySetDowngrade", 1)
	h.waitInstance("default/web", rev2.Hash, runningReady)

	// Revocation: a key set revoking the online key; what it signs is
	// refused from then on, and the daemon keeps running.
	h.agent.HandleMessage(schema.KeySetTopic, keys.keySet(t, 3, []string{signing.KeyID(pub(keys.online))}))
	checkfor.Eventually(t, 5*time.Second, 5*time.Millisecond, func() error {
		if h.agent.KeySetVersion() != 3 {
			return errors.New("key set 3 not accepted")
		}
		return nil
	})
	h.agent.HandleMessage(desiredTopic, signed(t, keys.online, desiredTopic, testNode, 3, now, desiredState(testNode, 3)))
	waitRefused(t, h, "SigningKeyRevoked", 1)

	// Expiry stops nothing that runs: a day and more later, still running.
	h.clock.Advance(72 * time.Hour)
	h.waitPasses(3)
	h.waitInstance("default/web", rev2.Hash, runningReady)
	assert.Len(t, h.managed(), 1)
}

// keysOfRoot is a key set signed by root (not the fleet's) delegating keys.
func keysOfRoot(t *testing.T, root ed25519.PrivateKey, keys ...ed25519.PrivateKey) []byte {
	t.Helper()
	ks := signing.KeySet{Version: 99}
	for _, k := range keys {
		ks.Keys = append(ks.Keys, signing.OnlineKey{ID: signing.KeyID(pub(k)), PublicKey: pub(k), Expires: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)})
	}
	b, err := signing.SignKeySet(root, ks)
	require.NoError(t, err)
	return b
}

// TestInsecureModeTakesPlainMessages: without a trust root the agent
// behaves as before signing.
func TestInsecureModeTakesPlainMessages(t *testing.T) {
	h := newHarness(t)
	h.start(h.config())
	h.connect()
	assert.False(t, h.conn.subscribed(schema.KeySetTopic))
	rev := testRevision("default/web", testTemplate("busybox:1.36"))
	h.sendDesired(1, want(rev))
	h.sendRevision(rev)
	h.waitInstance("default/web", rev.Hash, runningReady)
	assert.Nil(t, h.agent.Refusals())
}
