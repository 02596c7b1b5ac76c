package edgeagent_test

import (
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgeset/edgeset/internal/checkfor"
	"github.com/edgeset/edgeset/schema"
	"github.com/edgeset/edgeset/signing"
)

// signedRequest wraps v, sent on topic for node, in an envelope signed by
// k, issued at issued and valid for signing.RequestValidity, as the
// controller signs requests.
func signedRequest(t *testing.T, k ed25519.PrivateKey, topic, node string, issued time.Time, v any) []byte {
	t.Helper()
	b, err := signing.NewSigner(k).Sign(signing.Statement{Topic: topic, Node: node,
		IssuedAt: issued, ExpiresAt: issued.Add(signing.RequestValidity), Body: mustJSON(t, v)})
	require.NoError(t, err)
	return b
}

// TestSignedRequests: an agent pinning the fleet root opens a signed exec
// request, input chunk or log request, and refuses (counts and reports,
// returning nothing to run) an unsigned, forged, replayed, expired,
// cross-node or pre-start one. Input chunks are not remembered: the
// session orders and deduplicates them.
func TestSignedRequests(t *testing.T) {
	keys := newFleetKeys()
	h := newHarness(t)
	cfg := h.config()
	cfg.TrustRoot = pub(keys.root)
	started := h.clock.Now()
	h.start(cfg)
	h.connect()

	execTopic := schema.NodeTopic(testNode, schema.TopicExecRequest)
	logsTopic := schema.NodeTopic(testNode, schema.TopicLogsRequest)
	inputTopic := schema.ExecInputTopic(testNode, "s1")
	execReq := func(id string) schema.ExecRequest {
		return schema.ExecRequest{SchemaVersion: schema.WireVersion, Node: testNode, ID: id, DaemonSet: "default/web", Command: []string{"id"}}
	}
	h.clock.Advance(time.Second)
	now := h.clock.Now()
	early := signedRequest(t, keys.online, execTopic, testNode, now, execReq("e1"))
	_, ok := h.agent.OpenRequest(execTopic, early)
	require.False(t, ok, "no key set yet: nothing is trusted")
	waitRefused(t, h, "SigningKeyUnknown", 1)

	h.agent.HandleMessage(schema.KeySetTopic, keys.keySet(t, 1, nil, keys.online))
	checkfor.Eventually(t, 5*time.Second, 5*time.Millisecond, func() error {
		if h.agent.KeySetVersion() != 1 {
			return fmt.Errorf("key set not accepted yet")
		}
		return nil
	})

	good := signedRequest(t, keys.online, execTopic, testNode, now, execReq("e2"))
	body, ok := h.agent.OpenRequest(execTopic, good)
	require.True(t, ok)
	assert.JSONEq(t, string(mustJSON(t, execReq("e2"))), string(body), "the request as the servers take it")
	input := schema.ExecInput{SchemaVersion: schema.WireVersion, Node: testNode, ID: "s1", Seq: 0, Data: []byte("ls\n")}
	chunk := signedRequest(t, keys.online, inputTopic, testNode, now, input)
	for range 2 {
		body, ok = h.agent.OpenRequest(inputTopic, chunk)
		require.True(t, ok, "an input chunk again is the session's to drop")
		assert.JSONEq(t, string(mustJSON(t, input)), string(body))
	}
	logReq := schema.LogRequest{SchemaVersion: schema.WireVersion, Node: testNode, ID: "l1", DaemonSet: "default/web"}
	_, ok = h.agent.OpenRequest(logsTopic, signedRequest(t, keys.online, logsTopic, testNode, now, logReq))
	require.True(t, ok)
	require.Equal(t, map[string]uint64{"SigningKeyUnknown": 1}, h.agent.Refusals(), "nothing else refused so far")

	otherExec := schema.NodeTopic("gw-2", schema.TopicExecRequest)
	attacks := []struct {
		name, topic, reason string
		payload             []byte
	}{
		{"replayed exec request", execTopic, "SignedRequestReplayed", good},
		{"unsigned exec request", execTopic, "SignedDocumentMissing", mustJSON(t, execReq("e3"))},
		{"forged exec request", execTopic, "SigningKeyUnknown", signedRequest(t, keys.attacker, execTopic, testNode, now, execReq("e4"))},
		{"gw-2's exec request on gw-1's topic", execTopic, "SignedDocumentWrongTopic",
			signedRequest(t, keys.online, otherExec, "gw-2", now, execReq("e5"))},
		{"signed for gw-2 on gw-1's topic", execTopic, "SignedDocumentWrongNode",
			signedRequest(t, keys.online, execTopic, "gw-2", now, execReq("e6"))},
		{"expired exec request", execTopic, "SignedDocumentExpired",
			signedRequest(t, keys.online, execTopic, testNode, now.Add(-signing.RequestValidity-time.Second), execReq("e7"))},
		{"issued before the agent started", execTopic, "SignedRequestReplayed",
			signedRequest(t, keys.online, execTopic, testNode, started.Add(-time.Second), execReq("e8"))},
		{"a document's validity on a request", execTopic, "SignedDocumentMalformed",
			signed(t, keys.online, execTopic, testNode, 0, now, execReq("e9"))},
		{"forged input chunk", inputTopic, "SignatureInvalid", tamper(t, chunk, []byte("rm -rf /\n"))},
		{"unsigned input chunk", inputTopic, "SignedDocumentMissing", mustJSON(t, input)},
		{"forged log request", logsTopic, "SigningKeyUnknown", signedRequest(t, keys.attacker, logsTopic, testNode, now, logReq)},
		{"replayed log request", logsTopic, "SignedRequestReplayed", signedRequest(t, keys.online, logsTopic, testNode, now, logReq)},
	}
	for _, a := range attacks {
		t.Run(a.name, func(t *testing.T) {
			before := h.agent.Refusals()[a.reason]
			body, ok := h.agent.OpenRequest(a.topic, a.payload)
			assert.False(t, ok)
			assert.Nil(t, body)
			assert.Equal(t, before+1, h.agent.Refusals()[a.reason], "counted at once (all: %v)", h.agent.Refusals())
		})
	}
	checkfor.Eventually(t, 5*time.Second, 5*time.Millisecond, func() error {
		got := refusalEvents(t, h)
		for _, a := range attacks {
			if !slices.Contains(got, a.reason) {
				return fmt.Errorf("no %s event among %v", a.reason, got)
			}
		}
		return nil
	})
}

// TestRequestsInsecureMode: without a trust root a request is taken as it
// came, signed or not: the insecure mode.
func TestRequestsInsecureMode(t *testing.T) {
	h := newHarness(t)
	h.start(h.config())
	topic := schema.NodeTopic(testNode, schema.TopicExecRequest)
	plain := []byte(`{"schemaVersion":1,"node":"gw-1","id":"a","daemonSet":"default/web","command":["id"]}`)
	for range 2 {
		body, ok := h.agent.OpenRequest(topic, plain)
		require.True(t, ok)
		assert.Equal(t, plain, body)
	}
	assert.Nil(t, h.agent.Refusals())
}

// tamper replaces the data of the input chunk in env's body, keeping the
// signature: what an attacker without the key can do to a captured one.
func tamper(t *testing.T, env, data []byte) []byte {
	t.Helper()
	var e signing.Envelope
	require.NoError(t, json.Unmarshal(env, &e))
	var st signing.Statement
	require.NoError(t, json.Unmarshal(e.Payload, &st))
	var in schema.ExecInput
	require.NoError(t, json.Unmarshal(st.Body, &in))
	in.Data = data
	st.Body = mustJSON(t, in)
	e.Payload = mustJSON(t, st)
	return mustJSON(t, e)
}
