package controller

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgeset/edgeset/controller/api"
	"github.com/edgeset/edgeset/controller/reconcile"
	"github.com/edgeset/edgeset/internal/checkfor"
	"github.com/edgeset/edgeset/mqttclient"
	"github.com/edgeset/edgeset/schema"
	"github.com/edgeset/edgeset/signing"
)

func TestDesiredGeneration(t *testing.T) {
	for _, gen := range []uint64{0, 1, 7, 1 << 40, ^uint64(0)} {
		m := desiredMessage("generation.example", reconcile.NodeDesired{Generation: gen,
			Instances: []schema.DesiredInstance{{DaemonSet: "ns/generation", Revision: "0123456789abcdef0123"}}})
		got, err := desiredGeneration(m.Payload)
		require.NoError(t, err)
		assert.Equal(t, gen, got)
	}
	_, err := desiredGeneration([]byte(`{"node":"x"}`))
	require.Error(t, err)
}

func TestSigningKeySetUpload(t *testing.T) {
	dir := t.TempDir()
	tc := startController(t, Config{DataDir: dir, Signing: true})
	ctx := context.Background()
	st, err := tc.api.Signing(ctx)
	require.NoError(t, err)
	require.True(t, st.Enabled)
	assert.Nil(t, st.KeySet)
	fi, err := os.Stat(filepath.Join(dir, "signing.key"))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm(), "the online key is private")

	pub, err := signing.ParsePublicKey(st.PublicKey)
	require.NoError(t, err)
	root, err := signing.GenerateKey()
	require.NoError(t, err)
	other, err := signing.GenerateKey()
	require.NoError(t, err)
	otherPub := other.Public().(ed25519.PublicKey)
	now := time.Now()
	set := func(v uint64, keys ...signing.OnlineKey) []byte {
		env, err := signing.SignKeySet(root, signing.KeySet{Version: v, IssuedAt: now, Keys: keys})
		require.NoError(t, err)
		return env
	}
	own := signing.OnlineKey{ID: st.KeyID, PublicKey: pub, Expires: now.Add(time.Hour)}
	cases := []struct {
		name, want string
		env        []byte
	}{
		{"not the controller's key", "does not delegate this controller's key",
			set(1, signing.OnlineKey{ID: signing.KeyID(otherPub), PublicKey: otherPub, Expires: now.Add(time.Hour)})},
		{"expired delegation", "expired", set(1, signing.OnlineKey{ID: st.KeyID, PublicKey: pub, Expires: now.Add(-time.Hour)})},
		{"not an envelope", "malformed", []byte(`{"x":1}`)},
		{"not JSON", "not a key set envelope", []byte(`garbage`)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := tc.api.PutKeySet(ctx, c.env)
			require.ErrorContains(t, err, c.want)
		})
	}
	got, err := tc.api.PutKeySet(ctx, set(2, own))
	require.NoError(t, err)
	require.NotNil(t, got.KeySet)
	assert.Equal(t, uint64(2), got.KeySet.Version)
	_, err = tc.api.PutKeySet(ctx, set(2, own))
	require.ErrorContains(t, err, "must be above the current version 2")

	// The key set and the key survive a restart.
	tc.stop()
	tc = startController(t, Config{DataDir: dir, Signing: true})
	st2, err := tc.api.Signing(ctx)
	require.NoError(t, err)
	assert.Equal(t, st.KeyID, st2.KeyID)
	require.NotNil(t, st2.KeySet)
	assert.Equal(t, uint64(2), st2.KeySet.Version)

	// A node's reports of refused documents are counted per reason;
	// other events are not.
	for _, reason := range []string{"SigningKeyUnknown", "SigningKeyUnknown", "BackOff"} {
		ev, _ := schema.Encode(schema.NodeEvent{SchemaVersion: schema.WireVersion, Node: "gw-1", Time: now,
			Type: schema.EventWarning, Reason: reason, Message: "refused"})
		tc.handleMessage(schema.NodeTopic("gw-1", schema.TopicEvents), ev)
	}
	st2, err = tc.api.Signing(ctx)
	require.NoError(t, err)
	require.Len(t, st2.Refusals, 1)
	assert.Equal(t, map[string]int64{"SigningKeyUnknown": 2}, st2.Refusals[0].ByReason)
}

// TestSignedPublish: with signing on, what the embedded broker carries on
// a node's desired topic and a revision topic verifies under the key set.
func TestSignedPublish(t *testing.T) {
	tc := startController(t, Config{Signing: true})
	got := make(chan [2][]byte, 16)
	require.NoError(t, tc.embeddedBroker(t).Subscribe("edgeset/v1/#", 77, func(topic string, payload []byte) {
		got <- [2][]byte{[]byte(topic), payload}
	}))
	n := startNode(t, tc.brokerURL(), tc.secret, gateway("gw-1", nil))
	defer n.stop()
	tc.applyYAML(t, dsManifest("exporter", "1.0", "10%"))
	st, err := tc.api.Signing(context.Background())
	require.NoError(t, err)
	pub, err := signing.ParsePublicKey(st.PublicKey)
	require.NoError(t, err)
	ks := &signing.KeySet{Version: 1, Keys: []signing.OnlineKey{{ID: st.KeyID, PublicKey: pub, Expires: time.Now().Add(time.Hour)}}}
	seen := map[string]bool{}
	deadline := time.After(wait)
	for !seen["desired"] || !seen["revision"] {
		select {
		case m := <-got:
			topic := string(m[0])
			exp := signing.Expect{Topic: topic, Node: "gw-1", Shared: true}
			switch {
			case topic == schema.NodeTopic("gw-1", schema.TopicDesired):
				seen["desired"] = true
			case strings.HasPrefix(topic, schema.RevisionTopic("")):
				seen["revision"] = true
			default:
				continue
			}
			_, err := signing.Verify(ks, m[1], exp, time.Now())
			require.NoError(t, err, topic)
		case <-deadline:
			t.Fatalf("saw %v", seen)
		}
	}
}

func TestSignedTopic(t *testing.T) {
	cases := []struct {
		topic, node string
		signed      bool
	}{
		{schema.NodeTopic("gw-1", schema.TopicDesired), "gw-1", true},
		{schema.NodeSecretTopic("gw-1", "abc"), "gw-1", true},
		{schema.RevisionTopic("abc"), "*", true},
		{schema.ConfigMapTopic("abc"), "*", true},
		{schema.KeySetTopic, "", false}, // signed by the root already
		{schema.NodeTopic("gw-1", schema.TopicLogsRequest), "gw-1", true},
		{schema.NodeTopic("gw-1", schema.TopicExecRequest), "gw-1", true},
		{schema.ExecInputTopic("gw-1", "s1"), "gw-1", true},
		{schema.NodeTopic("gw-1", schema.TopicLogsResponse), "", false},
		{schema.NodeTopic("gw-1", schema.TopicExecResponse), "", false},
		{schema.NodeTopic("gw-1", schema.TopicStatus), "", false},
		{schema.FenceTopic, "", false},
	}
	for _, c := range cases {
		node, ok := signedTopic(c.topic)
		assert.Equal(t, c.signed, ok, c.topic)
		assert.Equal(t, c.node, node, c.topic)
	}
}

// TestKeySetMovesIntoTheStore: a key set an earlier version kept in
// DATA_DIR/keyset.json is taken into the store at start (the store is
// what HA controllers share); from then on the store's is the one, a
// stale file notwithstanding.
func TestKeySetMovesIntoTheStore(t *testing.T) {
	dir := t.TempDir()
	priv, err := LoadOrCreateSigningKey(dir)
	require.NoError(t, err)
	pub := priv.Public().(ed25519.PublicKey)
	root, err := signing.GenerateKey()
	require.NoError(t, err)
	set := func(v uint64) []byte {
		env, err := signing.SignKeySet(root, signing.KeySet{Version: v, IssuedAt: time.Now(),
			Keys: []signing.OnlineKey{{ID: signing.KeyID(pub), PublicKey: pub, Expires: time.Now().Add(time.Hour)}}})
		require.NoError(t, err)
		return env
	}
	file := filepath.Join(dir, "keyset.json")
	require.NoError(t, signing.WriteKeySetFile(file, set(3)))

	tc := startController(t, Config{DataDir: dir, Signing: true})
	st, err := tc.api.Signing(context.Background())
	require.NoError(t, err)
	require.NotNil(t, st.KeySet, "the file's key set was taken")
	assert.Equal(t, uint64(3), st.KeySet.Version)
	_, err = tc.api.PutKeySet(context.Background(), set(4))
	require.NoError(t, err)
	tc.stop()

	require.NoError(t, os.Remove(file))
	require.NoError(t, signing.WriteKeySetFile(file, set(3))) // stale
	tc = startController(t, Config{DataDir: dir, Signing: true})
	st, err = tc.api.Signing(context.Background())
	require.NoError(t, err)
	require.NotNil(t, st.KeySet)
	assert.Equal(t, uint64(4), st.KeySet.Version, "the store's key set, not the stale file's")
}

// TestUndelegatedKeyIsReported: a controller whose key the key set does
// not delegate (an HA controller that joined after the last keys
// delegate) says so in a Warning event.
func TestUndelegatedKeyIsReported(t *testing.T) {
	dir := t.TempDir()
	root, err := signing.GenerateKey()
	require.NoError(t, err)
	other, err := signing.GenerateKey()
	require.NoError(t, err)
	otherPub := other.Public().(ed25519.PublicKey)
	env, err := signing.SignKeySet(root, signing.KeySet{Version: 2, IssuedAt: time.Now(),
		Keys: []signing.OnlineKey{{ID: signing.KeyID(otherPub), PublicKey: otherPub, Expires: time.Now().Add(time.Hour)}}})
	require.NoError(t, err)
	require.NoError(t, signing.WriteKeySetFile(filepath.Join(dir, "keyset.json"), env))
	tc := startController(t, Config{DataDir: dir, Signing: true})
	checkfor.Eventually(t, wait, 20*time.Millisecond, func() error {
		evs, err := tc.api.Events(context.Background(), api.EventFilter{Object: "controller"})
		if err != nil {
			return err
		}
		for _, e := range evs {
			if e.Reason == "SigningKeyNotDelegated" && e.Type == schema.EventWarning {
				return nil
			}
		}
		return fmt.Errorf("no SigningKeyNotDelegated event among %d", len(evs))
	})
}

// TestPublishedBytesAreSigned: edgeset_mqtt_messages_out_total and
// edgeset_mqtt_bytes_out_total count the messages as they reach the
// broker, signed, not as the decider wrote them.
func TestPublishedBytesAreSigned(t *testing.T) {
	var mu sync.Mutex
	var messages, wire, desired int
	tc := startController(t, Config{Signing: true, newTransport: countingTransportOf(func(m mqttclient.Message) {
		mu.Lock()
		defer mu.Unlock()
		messages++
		wire += len(m.Payload)
		if m.Topic == schema.NodeTopic("node-000001", schema.TopicDesired) && signing.IsEnvelope(m.Payload) {
			desired++
		}
	})})
	online, _ := schema.Encode(schema.Presence{SchemaVersion: schema.WireVersion, Node: "node-000001", Online: true, Session: 1})
	tc.handleMessage(schema.NodeTopic("node-000001", schema.TopicStatus), scaleStatus(1, false))
	tc.handleMessage(schema.NodeTopic("node-000001", schema.TopicOnline), online)
	tc.applyYAML(t, dsManifest("exporter", "1.0", "10%"))
	checkfor.Eventually(t, wait, 10*time.Millisecond, func() error {
		mu.Lock()
		defer mu.Unlock()
		if desired == 0 {
			return errors.New("no signed desired state published for node-000001")
		}
		if got := counterValue(tc.metrics.messagesOut); got != float64(messages) {
			return fmt.Errorf("messages counted %v, sent %d", got, messages)
		}
		if got := counterValue(tc.metrics.bytesOut); got != float64(wire) {
			return fmt.Errorf("bytes counted %v, sent %d", got, wire)
		}
		return nil
	})
}

// TestSignedEnvelopesAreCompact: a fleet-wide publish is signed in
// batches of signing.BatchSize (a three-hash audit path per envelope) and a
// document's times are whole seconds, while a request keeps the instant
// it was issued at, its identity against replay.
func TestSignedEnvelopesAreCompact(t *testing.T) {
	priv, err := signing.GenerateKey()
	require.NoError(t, err)
	signer := signing.NewSigner(priv)
	now := time.Date(2026, 12, 3, 20, 36, 43, 120089648, time.FixedZone("CET", 3600))
	var sent []mqttclient.Message
	inner, err := countingTransportOf(func(m mqttclient.Message) { sent = append(sent, m) })(transportHooks{})
	require.NoError(t, err)
	tr := &signingTransport{
		transport: inner,
		keys:      &signingKeys{signer: signer, validity: time.Hour},
		now:       func() time.Time { return now },
		signed:    prometheus.NewCounter(prometheus.CounterOpts{Name: "signed"}),
		failed:    prometheus.NewCounter(prometheus.CounterOpts{Name: "failed"}),
		seconds:   prometheus.NewCounter(prometheus.CounterOpts{Name: "seconds"}),
		tooLong:   func(m mqttclient.Message) { t.Errorf("%s reported too long", m.Topic) },
	}
	const nodes = 10
	var msgs []mqttclient.Message
	for i := range nodes {
		msgs = append(msgs, desiredMessage(fmt.Sprintf("node-%02d", i), reconcile.NodeDesired{Generation: 3}))
	}
	request := mqttclient.Message{Topic: schema.NodeTopic("node-00", schema.TopicLogsRequest), Payload: []byte(`{"id":"r1"}`)}
	require.NoError(t, tr.PublishAll(context.Background(), append(msgs, request)))
	require.Len(t, sent, nodes+1)

	ks := &signing.KeySet{Version: 1, Keys: []signing.OnlineKey{{ID: signer.KeyID(), PublicKey: signer.PublicKey(), Expires: now.Add(time.Hour)}}}
	for i, m := range sent[:nodes] {
		env, err := signing.DecodeEnvelope(m.Payload)
		require.NoError(t, err, m.Topic)
		p := env.Signatures[0].Batch
		require.NotNil(t, p, "%s: signed alone, not in a batch", m.Topic)
		assert.LessOrEqual(t, int(p.Size), signing.BatchSize, m.Topic)
		assert.Equal(t, uint32(i%signing.BatchSize), p.Index, m.Topic)
		assert.LessOrEqual(t, len(p.Path), 3, m.Topic)
		st, err := signing.Verify(ks, m.Payload, signing.Expect{Topic: m.Topic, Node: fmt.Sprintf("node-%02d", i)}, now)
		require.NoError(t, err, m.Topic)
		assert.Equal(t, now.UTC().Truncate(time.Second), st.IssuedAt, m.Topic)
		assert.Contains(t, string(env.Payload), `"issuedAt":"2026-12-03T19:36:43Z"`, "whole seconds in UTC")
	}
	env, err := signing.DecodeEnvelope(sent[nodes].Payload)
	require.NoError(t, err)
	assert.Contains(t, string(env.Payload), `"issuedAt":"2026-12-03T19:36:43.120089648Z"`, "a request keeps its instant")
}

// TestRepublishedTopic: the embedded broker keeps in memory only what the
// controller publishes again after every (re)connection, and persists
// what devices announce and what nothing republishes.
func TestRepublishedTopic(t *testing.T) {
	cases := []struct {
		topic       string
		republished bool
	}{
		{schema.NodeTopic("gw-1", schema.TopicDesired), true},
		{schema.NodeSecretTopic("gw-1", "abc"), true},
		{schema.RevisionTopic("abc"), true},
		{schema.ConfigMapTopic("abc"), true},
		{schema.KeySetTopic, true},
		{schema.NodeTopic("gw-1", schema.TopicStatus), false},
		{schema.NodeTopic("gw-1", schema.TopicOnline), false},
		{schema.NodeTopic("gw-1", schema.TopicObserved), false},
		{schema.NodeTopic("gw-1", schema.TopicTelemetry), false},
		{schema.NodeTopic("gw-1", schema.TopicLogsRequest), false},
		{schema.FenceTopic, false},
		{"edgeset/v1/nodes", false},
	}
	for _, c := range cases {
		assert.Equal(t, c.republished, republishedTopic(c.topic), c.topic)
	}
}
